package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/nacos/nacospb"
)

// nacosWatchCmd subscribes to a service over the Nacos 2.x gRPC API, as a Nacos 2.x
// client does, and prints the answer and every push: what a Nacos application sees.
func (a *app) nacosWatchCmd() *cobra.Command {
	var (
		addr, namespace, group, clusters string
		once                             bool
		timeout                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "nacos-watch SERVICE",
		Short: "Subscribe to a service over the Nacos 2.x gRPC API and print what a Nacos client sees",
		Long: "nacos-watch connects to a node's Nacos gRPC port (the HTTP port + 1000) the way nacos-sdk-go\n" +
			"v2 and the Java 2.x client do, subscribes to SERVICE and prints the instance list it is\n" +
			"answered, then every NotifySubscriberRequest push, each acknowledged, until interrupted\n" +
			"(--once: the answer only). Instances are shown as Nacos shows them: enabled ones only, all\n" +
			"healthy when the protect threshold is reached.",
		Example: "  roster nacos-watch orders-db --grpc-addr 127.0.0.1:9848 --clusters DEFAULT",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return usagef("--grpc-addr %q: %w", addr, err)
			}
			ctx := ctxOf(cmd)
			w := &nacosWatcher{out: a.stdout, json: a.output == outputJSON, timeout: timeout, tls: a.tlsConfig, token: a.token}
			if err := w.connect(ctx, addr); err != nil {
				return err
			}
			defer w.close()
			info, err := w.subscribe(ctx, namespace, group, args[0], clusters)
			if err != nil {
				return err
			}
			if err := w.print("answer", info); err != nil {
				return err
			}
			if once {
				return nil
			}
			return w.follow(ctx)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&addr, "grpc-addr", "127.0.0.1:9848", "Nacos gRPC address of a Roster node (host:port)")
	fs.StringVar(&namespace, "namespace", "public", "namespace id")
	fs.StringVar(&group, "group", "DEFAULT_GROUP", "group")
	fs.StringVar(&clusters, "clusters", "", "comma-separated clusters to see (default: all)")
	fs.BoolVar(&once, "once", false, "print the subscription's answer and exit")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "timeout of each request")
	fs.StringVarP(&a.output, "output", "o", outputTable, "output format: table or json")
	fs.StringVar(&a.token, "token", "", "ACL token secret, sent as the accessToken header as a logged-in Nacos client does")
	a.tlsFlags(cmd)
	return cmd
}

// nacosWatcher is a minimal Nacos 2.x naming client.
type nacosWatcher struct {
	out     io.Writer
	json    bool
	timeout time.Duration
	tls     *tls.Config // nil: plain text
	token   string      // ACL token secret ("" none)
	cc      *grpc.ClientConn
	stream  *nacospb.ClientBiStream
	cancel  context.CancelFunc
}

// nacosAnswer is the part of a response the watcher reads.
type nacosAnswer struct {
	ResultCode  int             `json:"resultCode"`
	ErrorCode   int             `json:"errorCode"`
	Message     string          `json:"message"`
	RequestID   string          `json:"requestId"`
	ServiceInfo json.RawMessage `json:"serviceInfo"`
}

func (w *nacosWatcher) connect(ctx context.Context, addr string) error {
	creds := insecure.NewCredentials()
	if w.tls != nil {
		creds = credentials.NewTLS(w.tls)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	w.cc = cc
	if _, err := w.call(ctx, "ServerCheckRequest", map[string]any{"module": "internal", "headers": map[string]string{}}); err != nil {
		return fmt.Errorf("server check at %s: %w", addr, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	if w.stream, err = nacospb.OpenBiStream(sctx, cc); err != nil {
		return fmt.Errorf("opening the stream at %s: %w", addr, err)
	}
	return w.send("ConnectionSetupRequest", map[string]any{
		"module": "internal", "clientVersion": "Roster-CLI:" + buildinfo.Get().Version, "tenant": "",
		"labels": map[string]string{"source": "sdk", "module": "naming"}, "headers": map[string]string{},
	})
}

func (w *nacosWatcher) close() {
	if w.cancel != nil {
		w.cancel()
	}
	if w.cc != nil {
		_ = w.cc.Close()
	}
}

// call sends one request and returns its answer; an answer with resultCode other than
// 200 is an error carrying Nacos's codes.
func (w *nacosWatcher) call(ctx context.Context, typ string, body any) (nacosAnswer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nacosAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	md := &nacospb.Metadata{Type: typ}
	if w.token != "" {
		// A logged-in Nacos client sends its token as the accessToken header of the
		// payload's metadata with every request.
		md.Headers = map[string]string{"accessToken": w.token}
	}
	out, err := nacospb.Call(ctx, w.cc, &nacospb.Payload{Metadata: md, Body: &anypb.Any{Value: b}})
	if err != nil {
		return nacosAnswer{}, err
	}
	var ans nacosAnswer
	if err := json.Unmarshal(out.GetBody().GetValue(), &ans); err != nil {
		return nacosAnswer{}, fmt.Errorf("%s answered %s: %w", typ, out.GetMetadata().GetType(), err)
	}
	if ans.ResultCode != 200 {
		return ans, &nacosCodeError{typ: out.GetMetadata().GetType(), code: ans.ErrorCode, msg: ans.Message}
	}
	return ans, nil
}

type nacosCodeError struct {
	typ  string
	code int
	msg  string
}

func (e *nacosCodeError) Error() string { return fmt.Sprintf("%s %d: %s", e.typ, e.code, e.msg) }

func (w *nacosWatcher) send(typ string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return w.stream.Send(&nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: b}})
}

// subscribe sends SubscribeServiceRequest, retrying while the node has not yet
// registered the connection (the setup travels on the stream, the request does not).
func (w *nacosWatcher) subscribe(ctx context.Context, ns, group, service, clusters string) (json.RawMessage, error) {
	req := map[string]any{"module": "naming", "namespace": ns, "groupName": group, "serviceName": service,
		"subscribe": true, "clusters": clusters, "headers": map[string]string{}}
	deadline := time.Now().Add(w.timeout)
	for {
		ans, err := w.call(ctx, "SubscribeServiceRequest", req)
		var ce *nacosCodeError
		if errors.As(err, &ce) && ce.code == 301 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		return ans.ServiceInfo, nil
	}
}

// follow prints every push until ctx ends or the node resets the connection.
func (w *nacosWatcher) follow(ctx context.Context) error {
	for {
		p, err := w.stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("stream: %w", err)
		}
		var req nacosAnswer
		if err := json.Unmarshal(p.GetBody().GetValue(), &req); err != nil {
			return fmt.Errorf("%s: %w", p.GetMetadata().GetType(), err)
		}
		ack := func(typ string) error {
			return w.send(typ, map[string]any{"resultCode": 200, "errorCode": 0, "success": true, "message": "", "requestId": req.RequestID})
		}
		switch p.GetMetadata().GetType() {
		case "NotifySubscriberRequest":
			if err := w.print("push", req.ServiceInfo); err != nil {
				return err
			}
			if err := ack("NotifySubscriberResponse"); err != nil {
				return err
			}
		case "ClientDetectionRequest":
			if err := ack("ClientDetectionResponse"); err != nil {
				return err
			}
		case "ConnectResetRequest":
			_ = ack("ConnectResetResponse")
			return errors.New("the node is shutting down and asked its clients to reconnect elsewhere")
		}
	}
}

// nacosServiceInfo is the part of a ServiceInfo the table shows.
type nacosServiceInfo struct {
	Name        string `json:"name"`
	GroupName   string `json:"groupName"`
	Clusters    string `json:"clusters"`
	LastRefTime int64  `json:"lastRefTime"`
	Reached     bool   `json:"reachProtectionThreshold"`
	Hosts       []struct {
		IP          string            `json:"ip"`
		Port        int               `json:"port"`
		Weight      float64           `json:"weight"`
		Healthy     bool              `json:"healthy"`
		Enabled     bool              `json:"enabled"`
		ClusterName string            `json:"clusterName"`
		Metadata    map[string]string `json:"metadata"`
	} `json:"hosts"`
}

func (w *nacosWatcher) print(event string, raw json.RawMessage) error {
	if w.json {
		return writeJSONLine(w.out, map[string]any{"event": event, "serviceInfo": raw})
	}
	var info nacosServiceInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return fmt.Errorf("serviceInfo: %w", err)
	}
	threshold := ""
	if info.Reached {
		threshold = ", protect threshold reached"
	}
	fmt.Fprintf(w.out, "%s %s@@%s clusters=%q lastRefTime=%d: %d instance(s)%s\n", event, safeText(info.GroupName), safeText(info.Name),
		info.Clusters, info.LastRefTime, len(info.Hosts), threshold)
	t := newTable(w.out, "ADDRESS", "CLUSTER", "WEIGHT", "HEALTHY", "ENABLED", "METADATA")
	for _, h := range info.Hosts {
		t.row(net.JoinHostPort(h.IP, strconv.Itoa(h.Port)), h.ClusterName, formatFloat(h.Weight),
			strconv.FormatBool(h.Healthy), strconv.FormatBool(h.Enabled), formatMeta(h.Metadata))
	}
	return t.flush()
}
