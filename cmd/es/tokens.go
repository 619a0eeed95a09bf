package main

import (
	"context"
	"strings"
	"time"

	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/deltalog"
)

// openTokens opens the tokens of es serve and es token: the file at spec,
// or, for spec nats://HOST:PORT[,nats://...], the shared store of several
// servers (a key-value bucket of that NATS cluster; README "Running
// several servers"). closeFn releases the NATS connection.
func openTokens(spec string) (t *server.Tokens, closeFn func(), err error) {
	if !strings.HasPrefix(spec, "nats://") {
		t, err = server.LoadTokens(spec)
		return t, func() {}, err
	}
	l, err := deltalog.Connect(spec, deltalog.Options{ClientName: "es-tokens"})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := l.KV(ctx, server.SharedTokensBucket)
	if err == nil {
		t, err = server.LoadSharedTokens(kv)
	}
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return t, l.Close, nil
}
