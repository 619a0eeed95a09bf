package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/energyscope/energyscope/server"
)

func runServe(e *env, args []string) error {
	var home, listen, certFile, keyFile, tokensFile, compactAt string
	var noAuth bool
	fs := newFlags(e, "serve", &home)
	fs.StringVar(&listen, "listen", "127.0.0.1:17800", "address to listen on")
	fs.StringVar(&certFile, "tls-cert", "", "TLS certificate (PEM); with --tls-key serves HTTPS")
	fs.StringVar(&keyFile, "tls-key", "", "TLS key (PEM)")
	fs.StringVar(&tokensFile, "tokens", "", "tokens file (default HOME/tokens.json; manage with es token)")
	fs.BoolVar(&noAuth, "no-auth", false, "serve without tokens (development on loopback only)")
	compactRows := fs.Int("compact-rows", 1_000_000, "compact a dataset when its delta holds this many rows")
	fs.StringVar(&compactAt, "compact-at", "", "also compact every dataset daily at this UTC time (HH:MM)")
	keep := fs.Int("keep", 2, "snapshots kept per dataset (the delta history reaches back to the oldest)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if tokensFile == "" {
		tokensFile = filepath.Join(home, server.TokensFile)
	}
	tokens, err := server.LoadTokens(tokensFile)
	if err != nil {
		return err
	}
	if tokens.Empty() && !noAuth {
		return fmt.Errorf("no tokens in %s: create one with 'es token add --home %s --name NAME --scope read|write', or pass --no-auth for local development", tokensFile, home)
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, nil))
	srv, err := server.New(server.Options{Home: home, Logger: log, Tokens: tokens, CompactRows: *compactRows, CompactAt: compactAt, Keep: *keep})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Hub().Close()
		hs.Shutdown(sctx)
	}()
	scheme := "http"
	if certFile != "" {
		scheme = "https"
	}
	log.Info("serving", "url", scheme+"://"+ln.Addr().String(), "home", home, "datasets", srv.Store().DatasetNames())
	fmt.Fprintf(e.stdout, "listening on %s://%s\n", scheme, ln.Addr())
	if certFile != "" {
		err = hs.ServeTLS(ln, certFile, keyFile)
	} else {
		err = hs.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func runToken(e *env, args []string) error {
	if len(args) == 0 || (args[0] != "add" && args[0] != "ls" && args[0] != "rm") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			fmt.Fprintln(e.stdout, "Usage: es token add --name NAME --scope read|write | es token ls | es token rm --name NAME  [--home DIR]")
			return nil
		}
		return usagef("want add, ls or rm")
	}
	var home, name, scope, tokensFile string
	fs := newFlags(e, "token", &home)
	fs.StringVar(&name, "name", "", "token name")
	fs.StringVar(&scope, "scope", server.ScopeRead, "read or write (write implies read)")
	fs.StringVar(&tokensFile, "tokens", "", "tokens file (default HOME/tokens.json)")
	if _, err := parse(fs, args[1:]); err != nil {
		return err
	}
	if tokensFile == "" {
		tokensFile = filepath.Join(home, server.TokensFile)
	}
	t, err := server.LoadTokens(tokensFile)
	if err != nil {
		return err
	}
	switch args[0] {
	case "add":
		plain, err := t.Add(name, scope)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, plain)
		fmt.Fprintf(e.stderr, "token %q (%s) added to %s; this is the only time it is shown\n", name, scope, tokensFile)
	case "ls":
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSCOPE\tCREATED\tSHA256")
		for _, tk := range t.List() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s…\n", tk.Name, tk.Scope, tk.Created.Format(time.RFC3339), tk.SHA256[:12])
		}
		return tw.Flush()
	case "rm":
		return t.Remove(name)
	}
	return nil
}
