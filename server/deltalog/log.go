package deltalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure a Log. The zero value is usable.
type Options struct {
	// Replicas of each stream Create makes: default 3 when the connected
	// server is part of a cluster, 1 on a single node.
	Replicas int
	// DuplicateWindow is how long the log remembers an append's key
	// (JetStream's duplicate window; default 10 minutes).
	DuplicateWindow time.Duration
	// AttemptTimeout bounds one publish attempt; Append retries with the
	// same key until its context ends (default 5 s).
	AttemptTimeout time.Duration
	// ClientName names the connection (default "es-deltalog").
	ClientName string
	// Logger receives retries and reconnects; nil discards.
	Logger *slog.Logger
}

// DefaultDuplicateWindow is Options.DuplicateWindow's default.
const DefaultDuplicateWindow = 10 * time.Minute

func (o Options) withDefaults() Options {
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 5 * time.Second
	}
	if o.ClientName == "" {
		o.ClientName = "es-deltalog"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Log is the delta log of every dataset, over one NATS connection. Its
// methods are safe for concurrent use; appends to one dataset are
// serialized within a Log (several Logs, e.g. replicas, may append to
// one dataset at once: Append keeps seqs contiguous across them).
type Log struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream

	mu       sync.Mutex          // guards datasets
	datasets map[string]*dataset // by lower-case name

	m struct{ appends, records, retries, conflicts, duplicates atomic.Int64 }
}

// Metrics counts what a Log did since it was opened.
type Metrics struct {
	Appends    int64 // acknowledged appends (duplicates included)
	Records    int64 // records in them
	Retries    int64 // attempts repeated after a failure that left the outcome unknown (timeouts, lost connections, elections)
	Conflicts  int64 // appends renumbered because another writer appended first
	Duplicates int64 // appends answered from an earlier one with the same key
}

// Metrics returns the Log's counters.
func (l *Log) Metrics() Metrics {
	return Metrics{
		Appends: l.m.appends.Load(), Records: l.m.records.Load(), Retries: l.m.retries.Load(),
		Conflicts: l.m.conflicts.Load(), Duplicates: l.m.duplicates.Load(),
	}
}

// dataset is what a Log knows of one dataset's stream.
type dataset struct {
	name   string // as created
	after  uint64 // the seq the first record follows
	stream jetstream.Stream

	// amu serializes this Log's appends to the dataset and guards the
	// tail: the stream seq of the last message and the last record seq in
	// it, as last seen (tailKnown false: re-read it before numbering).
	amu        sync.Mutex
	tailKnown  bool
	tailStream uint64
	tailSeq    uint64
	buf        []byte
}

// Connect dials an external NATS server or cluster (comma-separated
// URLs; the client fails over between them and reconnects forever).
func Connect(urls string, o Options) (*Log, error) {
	for _, u := range strings.Split(urls, ",") {
		if strings.TrimSpace(u) == "" {
			return nil, fmt.Errorf("deltalog: empty URL in %q", urls)
		}
	}
	return connect(urls, o)
}

// Connect opens a Log on the node in-process (no socket; the same client
// code as Connect).
func (n *Node) Connect(o Options) (*Log, error) {
	return connect(n.srv.ClientURL(), o, nats.InProcessServer(n.srv))
}

func connect(urls string, o Options, extra ...nats.Option) (*Log, error) {
	o = o.withDefaults()
	log := o.Logger
	opts := append([]nats.Option{
		nats.Name(o.ClientName),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, 100*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("delta log: disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("delta log: reconnected", "url", c.ConnectedUrlRedacted())
		}),
	}, extra...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, fmt.Errorf("deltalog: connect %s: %w", urls, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("deltalog: %w", err)
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
		if nc.ConnectedClusterName() != "" {
			o.Replicas = 3
		}
	}
	return &Log{opts: o, nc: nc, js: js, datasets: map[string]*dataset{}}, nil
}

// Close closes the connection. Calls in flight fail.
func (l *Log) Close() { l.nc.Close() }

// Replicas is the replica count Create uses.
func (l *Log) Replicas() int { return l.opts.Replicas }

// MaxBatchBytes is the largest encoded batch (format.EncodeBatch bytes)
// one append takes on this connection: the server's max_payload less
// the envelope and room for headers.
func (l *Log) MaxBatchBytes() int {
	return int(l.nc.MaxPayload()) - msgHeader - headerRoom
}

// headerRoom is what the headers of a message may take (NATS counts
// them in max_payload): NATS/1.0 line, Nats-Msg-Id, Es-Seq, expected
// last sequence.
const headerRoom = 512

// CreateOptions configure a new dataset's stream.
type CreateOptions struct {
	// After is the seq the dataset's first record follows (its head when
	// it moves to the log; 0 for a new dataset).
	After uint64
}

// Create makes dataset's stream if the log has none. Creating an
// existing dataset is a no-op (its After is kept); a name that differs
// only by case from an existing one is ErrNameConflict.
func (l *Log) Create(ctx context.Context, name string, co CreateOptions) error {
	if err := checkName(name); err != nil {
		return err
	}
	cfg := jetstream.StreamConfig{
		Name:        StreamName(name),
		Description: "EnergyScope delta log of dataset " + name,
		Subjects:    []string{Subject(name)},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    l.opts.Replicas,
		Duplicates:  l.opts.DuplicateWindow,
		DenyDelete:  true, // messages leave only by Trim (a purge of a prefix)
		Metadata:    map[string]string{metaDataset: name, metaAfter: strconv.FormatUint(co.After, 10)},
	}
	for {
		// Per attempt: a cluster without a meta leader (electing) drops
		// the request rather than answering it.
		actx, cancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
		_, err := l.js.CreateStream(actx, cfg)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// In use: made before (maybe by another replica, maybe with
			// another After); the stream's metadata decides.
			_, err = l.dataset(ctx, name)
			return err
		}
		// No peers: a cluster still forming (or a node down) cannot place
		// the replicas yet.
		if !retryable(err) && !isAPIError(err, jsErrNoPeers) || ctx.Err() != nil {
			return fmt.Errorf("deltalog: create %s: %w", name, err)
		}
		l.opts.Logger.Warn("delta log: create stream, retrying", "dataset", name, "err", err)
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("deltalog: create %s: %w", name, err)
		}
	}
}

// dataset returns what the Log knows of name, loading the stream the
// first time.
func (l *Log) dataset(ctx context.Context, name string) (*dataset, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if l.nc.IsClosed() {
		return nil, ErrClosed
	}
	key := strings.ToLower(name)
	l.mu.Lock()
	d := l.datasets[key]
	l.mu.Unlock()
	if d == nil {
		var st jetstream.Stream
		var err error
		for {
			actx, cancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
			st, err = l.js.Stream(actx, StreamName(name))
			cancel()
			if err == nil {
				break
			}
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, fmt.Errorf("%w: %s", ErrUnknownDataset, name)
			}
			if !retryable(err) || ctx.Err() != nil {
				return nil, fmt.Errorf("deltalog: stream of %s: %w", name, err)
			}
			if err := pause(ctx, 200*time.Millisecond); err != nil {
				return nil, fmt.Errorf("deltalog: stream of %s: %w", name, err)
			}
		}
		md := st.CachedInfo().Config.Metadata
		after, err := strconv.ParseUint(md[metaAfter], 10, 64)
		if err != nil || md[metaDataset] == "" {
			return nil, fmt.Errorf("deltalog: stream %s was not made by Create (metadata %v)", StreamName(name), md)
		}
		d = &dataset{name: md[metaDataset], after: after, stream: st}
		l.mu.Lock()
		if old := l.datasets[key]; old != nil {
			d = old
		} else {
			l.datasets[key] = d
		}
		l.mu.Unlock()
	}
	if d.name != name {
		return nil, fmt.Errorf("%w: %q, the log holds %q", ErrNameConflict, name, d.name)
	}
	return d, nil
}

// retryable reports whether err may pass once a connection, a leader or
// a quorum is back: the request may or may not have reached the stream.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503: JetStream not ready, no quorum / leader yet (an election).
		return apiErr.Code == 503 || apiErr.Code == 408 || apiErr.Code == 500
	}
	return errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionDraining) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, nats.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount)
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
