package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/cook"
)

// Handler returns the server's HTTP API. Every route runs behind panic
// recovery (a panic answers 500 and is logged with the request; the server
// keeps serving), sets its deadlines (route) and checks the token before it
// reads a body.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.route(routePlain, "", http.HandlerFunc(s.handleHealth)))
	if !s.opts.SeparateMetrics {
		mux.Handle("GET /metrics", s.route(routePlain, "", s.MetricsHandler()))
	}
	mux.Handle("GET /v1/sync", s.route(routeStream, ScopeRead, s.hub))
	mux.Handle("GET /v1/datasets", s.route(routePlain, ScopeRead, http.HandlerFunc(s.handleDatasets)))
	mux.Handle("POST /v1/datasets/{name}/rows", s.route(routeBody, ScopeWrite, http.HandlerFunc(s.handleRows)))
	mux.Handle("POST /v1/datasets/{name}/compact", s.route(routePlain, ScopeWrite, http.HandlerFunc(s.handleCompact)))
	mux.Handle("PUT /v1/datasets/{name}", s.route(routeBody, ScopeWrite, http.HandlerFunc(s.handleReplace)))
	mux.Handle("GET /v1/series/{id}", s.route(routePlain, ScopeRead, http.HandlerFunc(s.handleSeries)))
	mux.Handle("GET /v1/files/{name}/{sha}", s.route(routeStream, ScopeRead, http.HandlerFunc(s.handleFile)))
	// Vintages (vintages.go); ?asof= on GET /v1/series/{id} too.
	mux.Handle("GET /v1/datasets/{name}/vintages", s.route(routePlain, ScopeRead, http.HandlerFunc(s.handleVintages)))
	mux.Handle("GET /v1/series/{id}/revisions", s.route(routePlain, ScopeRead, http.HandlerFunc(s.handleRevisions)))
	mux.Handle("POST /v1/datasets/{name}/rollback", s.route(routePlain, ScopeWrite, http.HandlerFunc(s.handleRollback)))
	mux.Handle("POST /v1/datasets/{name}/tags", s.route(routeBody, ScopeWrite, http.HandlerFunc(s.handleTag)))
	return s.recoverPanics(mux)
}

// MetricsHandler serves the Prometheus metrics (also on Handler's
// /metrics unless Options.SeparateMetrics).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})
}

// routeKind says which deadlines a route gets.
type routeKind int

const (
	routePlain  routeKind = iota // a write deadline (Conn.WriteTimeout)
	routeBody                    // and a minimum body rate (Conn.BodyGrace, MinBodyRate)
	routeStream                  // none: websockets and snapshot files live long
)

// route wraps a handler with its deadlines and, when scope is set, the
// token check, which runs before any byte of the body is read.
func (s *Server) route(kind routeKind, scope string, h http.Handler) http.Handler {
	c := s.opts.Conn
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if kind == routeStream || c.WriteTimeout <= 0 {
			// A request before this one on the connection may have set one.
			rc.SetWriteDeadline(time.Time{})
		} else {
			rc.SetWriteDeadline(time.Now().Add(c.WriteTimeout))
		}
		if scope != "" && !s.authorize(w, r, scope) {
			return
		}
		if kind == routeBody && c.MinBodyRate > 0 && r.Body != nil && r.Body != http.NoBody {
			r.Body = &bodyReader{ReadCloser: r.Body, rc: rc, start: time.Now(), grace: c.BodyGrace, rate: c.MinBodyRate}
		}
		h.ServeHTTP(w, r)
	})
}

// authorize checks the bearer token for scope. A refused request's
// connection is closed without reading its body.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, scope string) bool {
	if s.authOff {
		markAuthenticated(r)
		return true
	}
	refuse := func(code int, msg string) bool {
		w.Header().Set("Connection", "close")
		// Do not let net/http drain the body of a refused request.
		http.NewResponseController(w).SetReadDeadline(time.Now())
		httpError(w, code, msg)
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return refuse(http.StatusUnauthorized, "missing bearer token")
	}
	name, granted := s.opts.Tokens.Check(tok, scope)
	if name == "" {
		return refuse(http.StatusUnauthorized, "unknown token")
	}
	markAuthenticated(r)
	if !granted {
		return refuse(http.StatusForbidden, "token "+name+" lacks the "+scope+" scope")
	}
	return true
}

// recoverPanics answers 500 to a request whose handler panicked and logs
// the panic with the request; the server goes on serving.
func (s *Server) recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v) // net/http's way to abort a response; it logs nothing
			}
			s.m.panics.Inc()
			s.log.Error("panic serving a request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			w.Header().Set("Connection", "close")
			httpError(w, http.StatusInternalServerError, "internal error")
		}()
		if s.beforeHandle != nil {
			s.beforeHandle(r)
		}
		h.ServeHTTP(w, r)
	})
}

// fail answers err with the status statusOf gives it. Internal errors are
// logged with the request; their message goes out with the home's path
// replaced by "HOME".
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	msg := err.Error()
	if code == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	}
	if code >= 500 {
		msg = s.scrub(msg) // a lake error may name the warehouse under the home
	}
	httpError(w, code, msg)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) handleDatasets(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"datasets": s.Heads(), "damaged": s.Damaged()})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := s.Health()
	if !s.authOff {
		// Dataset names and reasons only for a caller with a read token.
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if name, ok := s.opts.Tokens.Check(tok, ScopeRead); name == "" || !ok {
			h.Datasets = nil
		}
	}
	if h.Replica != nil && !h.Replica.Serving {
		// Not serving yet (replica.go): the waits say why.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(h)
		return
	}
	writeJSON(w, h)
}

func (s *Server) handleRows(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxIngestBody)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var recs []format.Record
	var err error
	switch ct {
	case "application/json":
		recs, err = ParseRowsJSON(r.Body)
	case "application/vnd.apache.arrow.stream":
		recs, err = ParseRowsArrow(r.Body)
	case "text/csv", "", "text/plain":
		recs, err = ParseRowsCSV(r.Body, "body", RowColumns{}, false)
	default:
		httpError(w, http.StatusUnsupportedMediaType, "want text/csv, application/json or application/vnd.apache.arrow.stream")
		return
	}
	if err != nil {
		// A parser fails only on its input, or on reading it (too large,
		// too slow: statusOf tells those apart).
		s.fail(w, r, badInput(err))
		return
	}
	// The client's key makes a retry (to this or another replica) store
	// nothing; without one, the server makes one and returns it.
	key := r.Header.Get(IdempotencyHeader)
	if key == "" {
		key = newKey()
	}
	first, last, err := s.IngestKey(r.Context(), name, recs, key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, map[string]any{"dataset": name, "rows": len(recs), "first_seq": first, "last_seq": last, "idempotency_key": key})
}

func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request) {
	m, err := s.Compact(r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, m)
}

// handleReplace takes one source file in the body (its kind from
// Content-Type or ?format=csv|parquet|arrow) and mapping options as query
// parameters (series_col, period_col, value_col, wide, prefix, frequency,
// unit, source).
func (s *Server) handleReplace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := format.ValidDatasetName(name); err != nil {
		s.fail(w, r, badInput(err)) // before reading up to 8 GiB
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxUploadBody)
	q := r.URL.Query()
	ext := ".csv"
	switch f := q.Get("format"); {
	case f == "parquet" || r.Header.Get("Content-Type") == "application/vnd.apache.parquet":
		ext = ".parquet"
	case f == "arrow" || r.Header.Get("Content-Type") == "application/vnd.apache.arrow.file":
		ext = ".arrow"
	}
	dir, err := s.newUploadDir()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer s.removeUploadDir(dir)
	path := filepath.Join(dir, "upload"+ext)
	f, err := os.Create(path)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_, err = io.Copy(f, r.Body)
	if cerr := f.Close(); err == nil && cerr != nil {
		s.fail(w, r, fmt.Errorf("upload: %w", cerr))
		return
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || errors.Is(err, os.ErrDeadlineExceeded) {
			s.fail(w, r, fmt.Errorf("upload: %w", err))
		} else {
			// The client went away or sent a broken body.
			s.fail(w, r, fmt.Errorf("%w: upload: %w", ErrBadInput, err))
		}
		return
	}
	o := cook.InputOptions{SeriesCol: q.Get("series_col"), PeriodCol: q.Get("period_col"), ValueCol: q.Get("value_col"),
		Wide: q.Get("wide") == "true" || q.Get("wide") == "1", Prefix: q.Get("prefix"), Frequency: q.Get("frequency"),
		Unit: q.Get("unit"), Source: q.Get("source")}
	m, err := s.Replace(name, []string{path}, o)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, m)
}

func parseTimeParam(v string, end bool) (int64, error) {
	if v == "" {
		if end {
			return snapshot.MaxTime, nil
		}
		return snapshot.MinTime, nil
	}
	t, err := cook.ParsePeriod(v)
	if err != nil {
		return 0, err
	}
	if end && len(v) == 10 {
		t += 86399
	}
	return t, nil
}

func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("asof") {
		s.handleSeriesAsOf(w, r)
		return
	}
	id := r.PathValue("id")
	from, err := parseTimeParam(r.URL.Query().Get("from"), false)
	if err != nil {
		httpError(w, http.StatusBadRequest, "from: "+err.Error())
		return
	}
	to, err := parseTimeParam(r.URL.Query().Get("to"), true)
	if err != nil {
		httpError(w, http.StatusBadRequest, "to: "+err.Error())
		return
	}
	// The points are read from the store's mappings: encode them under
	// its fault guard (View), so that a data file truncated underneath
	// fails this lookup (and marks the dataset damaged) instead of killing
	// the server; the response is written once nothing mapped is read.
	var body bytes.Buffer
	var ctype string
	accept := r.Header.Get("Accept")
	err = s.store.View(id, from, to, func(res localcache.Result) error {
		ctype = encodeSeries(&body, id, res, accept)
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.m.lookups.Inc()
	w.Header().Set("Content-Type", ctype)
	w.Write(body.Bytes())
}

// periodFormatter formats res's period i: RFC 3339 for an intraday
// series, else a date.
func periodFormatter(res localcache.Result) func(i int) string {
	pts := res.Points
	intraday := res.Frequency.Intraday()
	return func(i int) string {
		t := time.Unix(pts.Unix(i), 0).UTC()
		if intraday {
			return t.Format(time.RFC3339)
		}
		return t.Format("2006-01-02")
	}
}

// seriesJSON is the JSON answer of a series lookup.
func seriesJSON(id string, res localcache.Result) map[string]any {
	type point struct {
		Period string  `json:"period"`
		Value  float64 `json:"value"`
	}
	fmtPeriod := periodFormatter(res)
	ps := make([]point, res.Points.Len())
	for i := range ps {
		ps[i] = point{fmtPeriod(i), res.Points.Values[i]}
	}
	return map[string]any{"series": id, "dataset": res.Dataset, "frequency": res.Frequency, "points": ps}
}

// encodeSeries writes the points of res into buf in the format accept
// asks for (Arrow stream, JSON, else CSV) and returns its content type.
func encodeSeries(buf *bytes.Buffer, id string, res localcache.Result, accept string) string {
	pts := res.Points
	fmtPeriod := periodFormatter(res)
	switch {
	case strings.Contains(accept, "application/vnd.apache.arrow.stream"):
		schema := arrow.NewSchema([]arrow.Field{{Name: "period", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}}, {Name: "value", Type: arrow.PrimitiveTypes.Float64}}, nil)
		mem := memory.NewGoAllocator()
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i := 0; i < pts.Len(); i++ {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(pts.Unix(i)))
		}
		b.Field(1).(*array.Float64Builder).AppendValues(pts.Values, nil)
		rec := b.NewRecordBatch()
		defer rec.Release()
		iw := ipc.NewWriter(buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
		iw.Write(rec)
		iw.Close()
		return "application/vnd.apache.arrow.stream"
	case strings.Contains(accept, "application/json"):
		json.NewEncoder(buf).Encode(seriesJSON(id, res))
		return "application/json"
	default:
		buf.Grow(16 + 32*pts.Len()) // one allocation: a line is at most ~32 bytes
		buf.WriteString("period,value\n")
		b := make([]byte, 0, 64)
		for i := 0; i < pts.Len(); i++ {
			b = append(b[:0], fmtPeriod(i)...)
			b = append(b, ',')
			b = strconv.AppendFloat(b, pts.Values[i], 'g', -1, 64)
			b = append(b, '\n')
			buf.Write(b)
		}
		return "text/csv"
	}
}

// handleFile serves a retained snapshot file by SHA-256 over plain HTTP
// (with Range support): a peer for the websocket transfer and a fallback.
func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) {
	f, err := s.OpenFile(r.PathValue("name"), r.PathValue("sha"))
	if err != nil {
		httpError(w, http.StatusNotFound, err.Error())
		return
	}
	defer f.Close()
	var content io.ReadSeeker
	var mod time.Time
	switch f := f.(type) {
	case *os.File:
		st, err := f.Stat()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		content, mod = f, st.ModTime() // sendfile
	case io.ReadSeeker:
		content = f // a region mapped in place (localcache.SnapshotFile)
	default:
		s.fail(w, r, fmt.Errorf("file %s of %s cannot be served", r.PathValue("sha"), r.PathValue("name")))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if d := s.opts.Conn.FileChunkTimeout; d > 0 {
		w = &progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: d}
	}
	http.ServeContent(w, r, "", mod, content)
}

// FileChunk is how much of a snapshot file download must be written
// within ConnOptions.FileChunkTimeout.
const FileChunk = 256 << 10

// progressWriter gives each write of at most FileChunk bytes its own
// write deadline, so the deadline advances with progress. ReadFrom keeps
// net/http's sendfile path: it hands the connection an *io.LimitedReader
// over the file itself (one level, which is what sendfile unwraps).
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (p *progressWriter) deadline() {
	p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		c := min(len(b), FileChunk)
		p.deadline()
		m, err := p.ResponseWriter.Write(b[:c])
		n += m
		if err != nil {
			return n, err
		}
		b = b[c:]
	}
	return n, nil
}

func (p *progressWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := p.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{p}, src)
	}
	r, left := src, int64(-1) // -1: to EOF
	if lr, ok := src.(*io.LimitedReader); ok {
		r, left = lr.R, lr.N
		defer func() { lr.N = left }()
	}
	var total int64
	for left != 0 {
		c := int64(FileChunk)
		if left > 0 {
			c = min(c, left)
		}
		p.deadline()
		n, err := rf.ReadFrom(&io.LimitedReader{R: r, N: c})
		total += n
		if left > 0 {
			left -= n
		}
		if err != nil {
			return total, err
		}
		if n < c {
			return total, nil // EOF
		}
	}
	return total, nil
}
