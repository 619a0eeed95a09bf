//go:build !linux

package mmap

import (
	"errors"
	"os"
)

const copySupported = false

func reopen(*os.File) (*os.File, error) { return nil, errors.ErrUnsupported }

func allocHuge(int) (mem, b []byte, err error) { return nil, nil, errors.ErrUnsupported }

func protectRead([]byte) error { return errors.ErrUnsupported }

func freeAnon([]byte) error { return errors.ErrUnsupported }
