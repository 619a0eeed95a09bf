package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/deltalog"
)

func runServe(e *env, args []string) error {
	var home, listen, metricsListen, certFile, keyFile, tokensFile, compactAt, natsURLs string
	var noAuth bool
	var conn server.ConnOptions
	fs := newFlags(e, "serve", &home)
	fs.StringVar(&listen, "listen", "127.0.0.1:17800", "address to listen on")
	fs.StringVar(&metricsListen, "metrics-listen", "", "serve /metrics (unauthenticated) on this address instead of --listen")
	fs.StringVar(&certFile, "tls-cert", "", "TLS certificate (PEM); with --tls-key serves HTTPS")
	fs.StringVar(&keyFile, "tls-key", "", "TLS key (PEM)")
	fs.StringVar(&tokensFile, "tokens", "", "tokens file (default HOME/tokens.json), or nats://HOST:PORT,... for the store several servers share; manage with es token; changes apply within a second")
	fs.BoolVar(&noAuth, "no-auth", false, "serve without tokens (development; only on a loopback address)")
	compactRows := fs.Int("compact-rows", 1_000_000, "compact a dataset when its delta holds this many rows")
	fs.StringVar(&compactAt, "compact-at", "", "also compact every dataset daily at this UTC time (HH:MM)")
	keep := fs.Int("keep", 2, "snapshots kept per dataset (the delta history reaches back to the oldest)")
	fs.DurationVar(&conn.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time to read a request's headers (also how long a new connection may stay silent)")
	fs.DurationVar(&conn.IdleTimeout, "idle-timeout", 60*time.Second, "close keep-alive connections idle this long")
	fs.DurationVar(&conn.WriteTimeout, "write-timeout", 60*time.Second, "time to write a response (not /v1/sync, /v1/files)")
	fs.DurationVar(&conn.BodyGrace, "body-grace", 30*time.Second, "a request body may arrive at any rate this long, then at --min-body-rate")
	fs.Int64Var(&conn.MinBodyRate, "min-body-rate", 32<<10, "bytes per second a request body must average after --body-grace")
	fs.DurationVar(&conn.FileChunkTimeout, "file-chunk-timeout", 60*time.Second, "each 256 KiB of a snapshot file download (/v1/files) must be written within this time, else it is cut")
	fs.IntVar(&conn.MaxUnauthConns, "max-unauth-conns", 256, "open connections without a passed token check; over it the oldest is closed")
	fs.StringVar(&natsURLs, "nats", "", "the delta log's external NATS JetStream cluster, nats://h1:4222,nats://h2:4222,... (default: an embedded node in HOME/nats)")
	formatVersion := fs.Int("format-version", 0, "snapshot format version the server writes (compactions, PUT re-cooks, rollbacks): 0 = this build's; set it to the version companions of an older build read (see FORMAT.md, Compatibility)")
	mappedIndex := fs.Bool("mapped-index", false, "serve lookups from index.hash's file mapping only: by default an index.hash of 64 MiB or more is copied into memory in 2 MiB pages after open (BENCHMARKS.md \"index.hash copied into huge pages\")")
	warm := fs.Bool("warm", false, "read what lookups read of each snapshot of 512 MiB or more into the page cache in 2 MiB folios in the background after it opens (BENCHMARKS.md \"Warming large snapshots\")")
	logWait := fs.Duration("log-wait", 2*time.Minute, "how long the start waits in all for the datasets' delta log streams (also each later reopen); a dataset whose log does not answer in time serves its snapshot, takes no rows and is retried every 5 s")
	var lf lakeFlags
	lf.add(fs)
	keepVintages := fs.Int("keep-vintages", 0, "lake retention: after each publish keep this many newest vintages per dataset (0 = no count limit; tagged and current vintages are always kept)")
	keepVintageDays := fs.Float64("keep-vintage-days", 0, "lake retention: after each publish also keep the vintages younger than this many days (0 = no age limit)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *keepVintages < 0 || *keepVintageDays < 0 {
		return usagef("--keep-vintages and --keep-vintage-days must not be negative")
	}
	if *formatVersion != 0 && (*formatVersion < format.MinFormatVersion || *formatVersion > format.FormatVersion) {
		return usagef("--format-version must be 0 (this build's, %d) or %d..%d, got %d", format.FormatVersion, format.MinFormatVersion, format.FormatVersion, *formatVersion)
	}
	if *logWait <= 0 {
		return usagef("--log-wait must be a positive duration (like 30s or 2m), got %v", *logWait)
	}
	if tokensFile == "" {
		tokensFile = filepath.Join(home, server.TokensFile)
	}
	tokens, closeTokens, err := openTokens(tokensFile)
	if err != nil {
		return err
	}
	defer closeTokens()
	if tokens.Empty() && !noAuth {
		return fmt.Errorf("no tokens in %s: create one with 'es token add --home %s --name NAME --scope read|write', or pass --no-auth for local development", tokens.Where(), home)
	}
	if noAuth {
		if err := checkLoopback(listen); err != nil {
			return usageError{fmt.Errorf("--no-auth: %w", err)}
		}
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, nil))
	lk, err := lf.openWith(home, log, true)
	if err != nil {
		return err
	}
	defer lk.Close()
	var dl *deltalog.Log // nil: server.New runs the embedded node in HOME/nats
	if natsURLs != "" {
		if dl, err = deltalog.Connect(natsURLs, deltalog.Options{Logger: log, ClientName: "es-serve"}); err != nil {
			return err
		}
		defer dl.Close()
	}
	srv, err := server.New(server.Options{Home: home, Logger: log, Tokens: tokens, CompactRows: *compactRows, CompactAt: compactAt, Keep: *keep,
		Conn: conn, SeparateMetrics: metricsListen != "", Lake: lk, DeltaLog: dl, LogWait: *logWait, FormatVersion: *formatVersion, WarmSnapshots: *warm, MappedIndex: *mappedIndex,
		KeepVintages: *keepVintages, KeepVintageFor: time.Duration(*keepVintageDays * float64(24*time.Hour))})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	if noAuth {
		// What was bound, whatever the name resolved to.
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
			ln.Close()
			return usageError{fmt.Errorf("--no-auth: %s is not a loopback address", ln.Addr())}
		}
	}
	hs := srv.HTTPServer()
	var ms *http.Server
	if metricsListen != "" {
		mln, err := net.Listen("tcp", metricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", srv.MetricsHandler())
		ms = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, WriteTimeout: time.Minute}
		go ms.Serve(mln)
		fmt.Fprintf(e.stdout, "metrics on http://%s/metrics\n", mln.Addr())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Hub().Close()
		if ms != nil {
			ms.Shutdown(sctx)
		}
		hs.Shutdown(sctx)
	}()
	scheme := "http"
	if certFile != "" {
		scheme = "https"
	}
	deltaLog := "embedded node in " + filepath.Join(home, server.NatsDir)
	if natsURLs != "" {
		var us []string
		for _, u := range strings.Split(natsURLs, ",") {
			shown := "(unparsable URL)"
			if pu, err := url.Parse(strings.TrimSpace(u)); err == nil {
				shown = pu.Redacted() // no password in the log
			}
			us = append(us, shown)
		}
		deltaLog = strings.Join(us, ",")
	}
	log.Info("serving", "url", scheme+"://"+ln.Addr().String(), "home", home, "datasets", srv.Store().DatasetNames(), "lake", lk.Warehouse(), "delta_log", deltaLog)
	fmt.Fprintf(e.stdout, "listening on %s://%s\n", scheme, ln.Addr())
	if certFile != "" {
		err = hs.ServeTLS(srv.LimitListener(ln), certFile, keyFile)
	} else {
		err = hs.Serve(srv.LimitListener(ln))
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// checkLoopback refuses a listen address that is not loopback only: an
// empty host, 0.0.0.0 and :: listen on every interface, and a name must
// resolve to loopback addresses only.
func checkLoopback(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("%q listens on every interface; use 127.0.0.1:PORT", listen)
	}
	var ips []net.IP
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		ips = []net.IP{ip}
	} else if ips, err = net.LookupIP(host); err != nil {
		return fmt.Errorf("resolve %q: %w", host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("%q is not a loopback address (%s); serve without tokens only on 127.0.0.1 or ::1", listen, ip)
		}
	}
	return nil
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
	fs.StringVar(&tokensFile, "tokens", "", "tokens file (default HOME/tokens.json), or nats://HOST:PORT,... for the store several servers share")
	if _, err := parse(fs, args[1:]); err != nil {
		return err
	}
	if tokensFile == "" {
		tokensFile = filepath.Join(home, server.TokensFile)
	}
	t, closeTokens, err := openTokens(tokensFile)
	if err != nil {
		return err
	}
	defer closeTokens()
	switch args[0] {
	case "add":
		plain, err := t.Add(name, scope)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, plain)
		fmt.Fprintf(e.stderr, "token %q (%s) added to %s; this is the only time it is shown\n", name, scope, t.Where())
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
