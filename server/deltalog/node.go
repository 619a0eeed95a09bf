package deltalog

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// NodeOptions configure a NATS server with JetStream run inside this
// process.
type NodeOptions struct {
	// Dir holds JetStream's store (Dir/jetstream/...). Required.
	Dir string
	// Name is the server name (required and unique in a cluster; default
	// "es-embedded").
	Name string
	// Port is the client port on 127.0.0.1; 0 picks a free one.
	Port int
	// MaxPayload bounds one message, hence one batch (default 32 MiB;
	// NATS allows up to 64 MiB and warns above 8 MiB).
	MaxPayload int32
	// Cluster makes the node one of a cluster (nil: a single node).
	Cluster *ClusterOptions
}

// ClusterOptions join a node to a cluster on 127.0.0.1.
type ClusterOptions struct {
	Name   string   // cluster name, the same on every node (default "es")
	Port   int      // route port on 127.0.0.1 (required: peers name it)
	Routes []string // nats://127.0.0.1:PORT of every node (its own may be listed)
}

// DefaultMaxPayload is a node's default message limit.
const DefaultMaxPayload = 32 << 20

// Node is a running NATS server with JetStream.
type Node struct {
	srv *natsserver.Server
	dir string
}

// StartNode starts a node and waits until it takes connections (a
// cluster node's JetStream may still be electing its meta leader; Log
// calls retry until their context ends). It listens on 127.0.0.1 only.
// Every write is fsynced before JetStream acknowledges it (SyncAlways,
// the server's sync_interval: always).
func StartNode(o NodeOptions) (*Node, error) {
	if o.Dir == "" {
		return nil, errors.New("deltalog: StartNode needs a directory")
	}
	if o.Name == "" {
		o.Name = "es-embedded"
	}
	if o.Port == 0 {
		o.Port = natsserver.RANDOM_PORT
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	so := &natsserver.Options{
		ServerName:         o.Name,
		Host:               "127.0.0.1",
		Port:               o.Port,
		NoSigs:             true,
		NoLog:              true,
		MaxPayload:         o.MaxPayload,
		JetStream:          true,
		StoreDir:           o.Dir,
		JetStreamMaxMemory: 64 << 20, // streams here are file-backed; this bounds the in-memory ones JetStream keeps itself
		SyncAlways:         true,
		HTTPPort:           0,
	}
	if c := o.Cluster; c != nil {
		if c.Port <= 0 {
			return nil, errors.New("deltalog: a cluster node needs a route port")
		}
		so.Cluster = natsserver.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: c.Port}
		if so.Cluster.Name == "" {
			so.Cluster.Name = "es"
		}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("deltalog: route %q: %w", r, err)
			}
			if u.Hostname() != "127.0.0.1" && u.Hostname() != "::1" && u.Hostname() != "localhost" {
				return nil, fmt.Errorf("deltalog: route %q is not on loopback", r)
			}
			so.Routes = append(so.Routes, u)
		}
	}
	srv, err := natsserver.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("deltalog: start node: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("deltalog: node did not become ready in 30 s")
	}
	return &Node{srv: srv, dir: o.Dir}, nil
}

// ClientURL is nats://127.0.0.1:PORT.
func (n *Node) ClientURL() string { return n.srv.ClientURL() }

// Name is the node's server name (the Leader of a stream's cluster info).
func (n *Node) Name() string { return n.srv.Name() }

// Shutdown stops the node (its stepping down first lets a cluster elect
// new leaders at once; a crash is a kill -9 of the process).
func (n *Node) Shutdown() {
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago
// (for a cluster's route ports, which peers must know before start).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return strconv.Atoi(p)
}
