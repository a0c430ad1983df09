package main

import (
	"fmt"
	"math/rand/v2"
	"net"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// devServer is an in-process Temporal server on SQLite in memory, set up the
// way the Temporal CLI's dev server (and go.temporal.io/server/temporaltest)
// sets it up: one history shard, all four services in this process, every
// port a free one on 127.0.0.1. Nothing is written to disk; Stop removes it.
type devServer struct {
	srv      temporal.Server
	hostPort string
}

// tuned is the dynamic config the in-process server runs with unless
// Stock is set (README.md says why each one).
func tuned(partitions int) map[dynamicconfig.Key]any {
	const unlimited = 100000
	return map[dynamicconfig.Key]any{
		// One partition per task queue (default 4): with one worker
		// process there is nothing to spread, and a poll that lands on an
		// empty partition only adds a forwarding hop.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  partitions,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): partitions,
		// History's task queue readers poll the database at most 20 times
		// a second per shard by default. With one shard, every workflow
		// or activity task dispatch of back-to-back work waits for one of
		// those polls: 50 ms a hop (a 20-step sequence took 1.05 s instead
		// of 0.1 s). A cluster has hundreds of shards and so no such cap.
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   unlimited,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():      unlimited,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): unlimited,
		// Per-instance request rate limits (frontend 2400/s per instance
		// and per namespace, matching 1200/s, history 3000/s): a
		// 256-branch fan-out's polls and completions come in bursts above
		// them, the SDK's pollers get "namespace rate limit exceeded" and
		// back off for a second. One benchmark process is the only client.
		dynamicconfig.FrontendRPS.Key():                        unlimited,
		dynamicconfig.FrontendMaxNamespaceRPSPerInstance.Key(): unlimited,
		dynamicconfig.MatchingRPS.Key():                        unlimited,
		dynamicconfig.HistoryRPS.Key():                         unlimited,
	}
}

// devServerOptions tune the in-process server.
type devServerOptions struct {
	Namespace string
	// Partitions is the number of read and write partitions of every task
	// queue (the server's default is 4).
	Partitions int
	// Stock leaves the server's dynamic config at Temporal's defaults
	// (tuned is not applied).
	Stock  bool
	Logger log.Logger
}

func freePorts(n int) ([]int, error) {
	// Hold every listener until all are chosen so no two are equal.
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// startDevServer starts the server and returns once its frontend accepts
// calls (temporal.Server.Start blocks until every service started).
func startDevServer(opt devServerOptions) (*devServer, error) {
	if opt.Namespace == "" {
		opt.Namespace = "default"
	}
	if opt.Partitions <= 0 {
		opt.Partitions = 1
	}
	if opt.Logger == nil {
		opt.Logger = log.NewNoopLogger()
	}
	// frontend, history, matching and worker gRPC, then their membership
	// ports (no metrics, pprof or HTTP listeners: 0 leaves them off).
	ports, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	const ip = "127.0.0.1"
	front := fmt.Sprintf("%s:%d", ip, ports[0])
	sqlCfg := &config.SQL{
		PluginName: sqliteplugin.PluginName,
		// A shared-cache in-memory database under a random name: nothing on
		// disk, gone when the process ends.
		ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"},
		DatabaseName:      fmt.Sprintf("durabench-%d", rand.Int64()),
	}
	svc := func(i int) config.Service {
		return config.Service{RPC: config.RPC{
			GRPCPort: ports[i], MembershipPort: ports[4+i], BindOnIP: ip,
		}}
	}
	cfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30e9, BroadcastAddress: ip},
		},
		Persistence: config.Persistence{
			DefaultStore: sqliteplugin.PluginName, VisibilityStore: sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace: false, FailoverVersionIncrement: 10,
			MasterClusterName: "active", CurrentClusterName: "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: front},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": svc(0), "history": svc(1), "matching": svc(2), "worker": svc(3),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		PublicClient: config.PublicClient{HostPort: front},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
	}
	nsCfg, err := sqlite.NewNamespaceConfig("active", opt.Namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("namespace config: %w", err)
	}
	if err := sqlite.CreateNamespaces(sqlCfg, nsCfg); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	authorizer, err := authorization.GetAuthorizerFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return nil, err
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, opt.Logger)
	if err != nil {
		return nil, err
	}
	dc := dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
	}
	if !opt.Stock {
		for k, v := range tuned(opt.Partitions) {
			dc[k] = []dynamicconfig.ConstrainedValue{{Value: v}}
		}
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(opt.Logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("temporal server start: %w", err)
	}
	return &devServer{srv: srv, hostPort: front}, nil
}

// Stop stops every service; the in-memory database goes with the process's
// last connection to it.
func (d *devServer) Stop() error { return d.srv.Stop() }
