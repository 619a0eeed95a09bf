//go:build !linux

package mmap

import (
	"errors"
	"os"
)

const warmSupported = false

func dupFile(*os.File) (*os.File, error) { return nil, errors.ErrUnsupported }

func warmRange(*os.File, int64, int) error { return errors.ErrUnsupported }

func ioprioIdle() {}
