package server

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/cook"
)

// Request limits.
const (
	maxIngestBody = 256 << 20
	maxUploadBody = 8 << 30
)

// Handler returns the server's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /v1/sync", s.auth(ScopeRead, s.hub))
	mux.Handle("GET /v1/datasets", s.auth(ScopeRead, http.HandlerFunc(s.handleDatasets)))
	mux.Handle("POST /v1/datasets/{name}/rows", s.auth(ScopeWrite, http.HandlerFunc(s.handleRows)))
	mux.Handle("POST /v1/datasets/{name}/compact", s.auth(ScopeWrite, http.HandlerFunc(s.handleCompact)))
	mux.Handle("PUT /v1/datasets/{name}", s.auth(ScopeWrite, http.HandlerFunc(s.handleReplace)))
	mux.Handle("GET /v1/series/{id}", s.auth(ScopeRead, http.HandlerFunc(s.handleSeries)))
	mux.Handle("GET /v1/files/{name}/{sha}", s.auth(ScopeRead, http.HandlerFunc(s.handleFile)))
	return mux
}

// auth checks the bearer token for scope (skipped when no tokens are
// configured).
func (s *Server) auth(scope string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := s.opts.Tokens; t != nil && !t.Empty() {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				httpError(w, http.StatusUnauthorized, "missing bearer token")
				return
			}
			name, granted := t.Check(tok, scope)
			if name == "" {
				httpError(w, http.StatusUnauthorized, "unknown token")
				return
			}
			if !granted {
				httpError(w, http.StatusForbidden, "token "+name+" lacks the "+scope+" scope")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
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
	writeJSON(w, map[string]any{"datasets": s.Heads()})
}

func (s *Server) handleRows(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	r.Body = http.MaxBytesReader(w, r.Body, maxIngestBody)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var recs []delta.Record
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
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	first, last, err := s.Ingest(name, recs)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, localcache.ErrNoDataset) {
			code = http.StatusNotFound
		} else if errors.Is(err, delta.ErrBadRecord) {
			code = http.StatusBadRequest
		}
		httpError(w, code, err.Error())
		return
	}
	writeJSON(w, map[string]any{"dataset": name, "rows": len(recs), "first_seq": first, "last_seq": last})
}

func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request) {
	m, err := s.Compact(r.PathValue("name"))
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, localcache.ErrNoDataset) {
			code = http.StatusNotFound
		}
		httpError(w, code, err.Error())
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
	r.Body = http.MaxBytesReader(w, r.Body, maxUploadBody)
	q := r.URL.Query()
	ext := ".csv"
	switch f := q.Get("format"); {
	case f == "parquet" || r.Header.Get("Content-Type") == "application/vnd.apache.parquet":
		ext = ".parquet"
	case f == "arrow" || r.Header.Get("Content-Type") == "application/vnd.apache.arrow.file":
		ext = ".arrow"
	}
	dir, err := os.MkdirTemp(s.opts.Home, ".upload-")
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "upload"+ext)
	f, err := os.Create(path)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	_, err = io.Copy(f, r.Body)
	f.Close()
	if err != nil {
		httpError(w, http.StatusBadRequest, "upload: "+err.Error())
		return
	}
	o := cook.InputOptions{SeriesCol: q.Get("series_col"), PeriodCol: q.Get("period_col"), ValueCol: q.Get("value_col"),
		Wide: q.Get("wide") == "true" || q.Get("wide") == "1", Prefix: q.Get("prefix"), Frequency: q.Get("frequency"),
		Unit: q.Get("unit"), Source: q.Get("source")}
	m, err := s.Replace(name, []string{path}, o)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
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
	res, err := s.store.Get(id, from, to)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, localcache.ErrNotFound) {
			code = http.StatusNotFound
		}
		httpError(w, code, err.Error())
		return
	}
	defer res.Release()
	s.m.lookups.Inc()
	pts := res.Points
	accept := r.Header.Get("Accept")
	intraday := res.Frequency.Intraday()
	fmtPeriod := func(i int) string {
		t := time.Unix(pts.Unix(i), 0).UTC()
		if intraday {
			return t.Format(time.RFC3339)
		}
		return t.Format("2006-01-02")
	}
	switch {
	case strings.Contains(accept, "application/vnd.apache.arrow.stream"):
		w.Header().Set("Content-Type", "application/vnd.apache.arrow.stream")
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
		iw := ipc.NewWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(mem))
		iw.Write(rec)
		iw.Close()
	case strings.Contains(accept, "application/json"):
		type point struct {
			Period string  `json:"period"`
			Value  float64 `json:"value"`
		}
		ps := make([]point, pts.Len())
		for i := range ps {
			ps[i] = point{fmtPeriod(i), pts.Values[i]}
		}
		writeJSON(w, map[string]any{"series": id, "dataset": res.Dataset, "frequency": res.Frequency, "points": ps})
	default:
		w.Header().Set("Content-Type", "text/csv")
		buf := []byte("period,value\n")
		for i := 0; i < pts.Len(); i++ {
			buf = append(buf, fmtPeriod(i)...)
			buf = append(buf, ',')
			buf = strconv.AppendFloat(buf, pts.Values[i], 'g', -1, 64)
			buf = append(buf, '\n')
		}
		w.Write(buf)
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
	st, err := f.Stat()
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f)
}
