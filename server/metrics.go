package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus collectors, on a registry of its own
// (no package globals).
type metrics struct {
	reg            *prometheus.Registry
	ingestRows     prometheus.Counter
	ingestSeconds  prometheus.Histogram
	compactions    prometheus.Counter
	compactSeconds prometheus.Histogram
	acks           prometheus.Counter
	lookups        prometheus.Counter
	panics         prometheus.Counter
	uploadsSwept   prometheus.Counter
	tokenReloads   prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.ingestRows = prometheus.NewCounter(prometheus.CounterOpts{Name: "es_ingest_rows_total", Help: "Rows ingested (durable and fanned out)."})
	m.ingestSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "es_ingest_seconds", Help: "Ingest latency: seq assignment, fsyncs, apply, fan-out.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	m.compactions = prometheus.NewCounter(prometheus.CounterOpts{Name: "es_compactions_total", Help: "Snapshots published by compaction."})
	m.compactSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "es_compaction_seconds", Help: "Compaction duration.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)})
	m.acks = prometheus.NewCounter(prometheus.CounterOpts{Name: "es_client_acks_total", Help: "Acks received from companions."})
	m.lookups = prometheus.NewCounter(prometheus.CounterOpts{Name: "es_lookups_total", Help: "Series lookups served over HTTP."})
	m.panics = prometheus.NewCounter(prometheus.CounterOpts{Name: "es_http_panics_total", Help: "Requests whose handler panicked (recovered, answered 500)."})
	m.uploadsSwept = prometheus.NewCounter(prometheus.CounterOpts{Name: "es_uploads_swept_total", Help: "Interrupted upload directories removed."})
	m.tokenReloads = prometheus.NewCounter(prometheus.CounterOpts{Name: "es_token_reloads_total", Help: "Reloads of the tokens file after a change."})
	m.reg.MustRegister(m.ingestRows, m.ingestSeconds, m.compactions, m.compactSeconds, m.acks, m.lookups, m.panics, m.uploadsSwept, m.tokenReloads,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "es_unauthenticated_connections", Help: "Open connections not yet authenticated."}, func() float64 { return float64(s.conns.unauthenticated()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "es_unauthenticated_evictions_total", Help: "Unauthenticated connections closed to stay under the cap."}, func() float64 { return float64(s.conns.evicted.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "es_damaged_datasets", Help: "Datasets the server cannot serve or update."}, func() float64 { return float64(len(s.Damaged())) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "es_connections", Help: "Open websocket connections."}, func() float64 { return float64(s.hub.Stats().Connections) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "es_slow_consumer_disconnects_total", Help: "Subscribers cut off for falling behind."}, func() float64 { return float64(s.hub.Stats().SlowConsumerCuts) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "es_sent_bytes_total", Help: "Bytes written to websockets."}, func() float64 { return float64(s.hub.Stats().BytesOut) }),
	)
	return m
}
