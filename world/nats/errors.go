package natsworld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
)

// ErrUnreachable is returned by New when no NATS server answers at the
// configured URL within the connect timeout. The error that wraps it names the
// URL (with any password redacted).
var ErrUnreachable = errors.New("NATS server unreachable")

// ErrConnectionLost is returned by world calls made while the connection to
// the NATS server is down or closed. It wraps world.ErrTransient, so the engine
// treats it as retryable; a driver that sees it persist stops the sweep.
var ErrConnectionLost = fmt.Errorf("connection to NATS lost: %w", world.ErrTransient)

// untilLeader makes a publish that no stream leader answers ("no
// responders": a replicated stream electing a new leader after its leader
// died) go out again every 100 ms until the call's deadline. Nothing was
// stored, so it is safe. nats.go's default, two more tries 250 ms apart,
// gave up during an election on a loaded three-node cluster: every run the
// driver started in the 4 s after the leader's SIGKILL failed at create run
// (make chaos, docs/reliability.md).
var untilLeader = []jetstream.PublishOpt{jetstream.WithRetryWait(100 * time.Millisecond),
	jetstream.WithRetryAttempts(int(opTimeout / (100 * time.Millisecond)))}

// JetStream API error codes that durabench branches on (see the server's
// errors.json). The client only exports some of them.
const (
	codeWrongLastSequence = 10071
	// A clustered stream's leader answers a failed check of a message
	// still being proposed with this code instead.
	codeWrongLastSequenceConstant = 10164
	codeMessageNotFound           = 10037
	// A clustered stream's leader answers a publish whose Nats-Msg-Id
	// another publish is still proposing: "duplicate message id is in
	// process".
	codeMsgIDInProcess = 10158
)

// isMsgIDInProcess reports whether err is the leader's "duplicate message
// id is in process" answer.
func isMsgIDInProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeMsgIDInProcess
}

// publish publishes msg and waits for an answer that decides it. A
// clustered stream's leader answers a message whose Nats-Msg-Id another
// publish is still proposing with "duplicate message id is in process"
// (409): the other publish may yet be stored or fail, so the answer decides
// nothing. Two processes write the same id at once in normal operation (a
// lazily resumed hook's hook_received is written by the resumer and
// re-ensured by the worker that takes its message), and the answer failed
// the resume as a conflict (make test-cluster, CI). publish sends msg
// again, backing off from 1 ms to 50 ms, until the answer decides: a
// duplicate (the other was stored) or its own store (the other failed).
// ctx bounds it; an undecided end is transient.
func (w *World) publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	wait := time.Millisecond
	for {
		ack, err := w.js.PublishMsg(ctx, msg, untilLeader...)
		if !isMsgIDInProcess(err) {
			return ack, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (the last answer: %w)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// isWrongLastSeq reports whether err is the server's answer to a failed
// expected-last-(subject-)sequence check.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == codeWrongLastSequence || apiErr.ErrorCode == codeWrongLastSequenceConstant)
}

// mapErr converts a NATS or JetStream error into one of the world's typed
// errors, keeping the original in the chain for diagnostics. op names the
// world call for the message. closed reports whether the world itself was
// closed (so a closed connection means ErrClosed, not a lost server).
func mapErr(op string, err error, closed bool) error {
	if err == nil {
		return nil
	}
	// Already typed by us.
	for _, typed := range []error{world.ErrNotFound, world.ErrPrecondition, world.ErrConflict,
		world.ErrGone, world.ErrTransient, world.ErrClosed} {
		if errors.Is(err, typed) {
			return err
		}
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	if closed {
		return fmt.Errorf("natsworld: %s: %w", op, world.ErrClosed)
	}
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConnectionClosed),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrStaleConnection),
		errors.Is(err, jetstream.ErrServerShutdown):
		return fmt.Errorf("natsworld: %s: %w (%w)", op, ErrConnectionLost, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrTooManyStalledMsgs),
		errors.Is(err, nats.ErrSlowConsumer), errors.Is(err, jetstream.ErrNoHeartbeat),
		errors.Is(err, jetstream.ErrConsumerLeadershipChanged):
		return fmt.Errorf("natsworld: %s: %w (%w)", op, world.ErrTransient, err)
	case errors.Is(err, jetstream.ErrMsgNotFound), errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrConsumerNotFound):
		return fmt.Errorf("natsworld: %s: %w (%w)", op, world.ErrNotFound, err)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch {
		case isWrongLastSeq(err):
			return fmt.Errorf("natsworld: %s: %w (%w)", op, world.ErrPrecondition, err)
		case apiErr.Code == 404:
			return fmt.Errorf("natsworld: %s: %w (%w)", op, world.ErrNotFound, err)
		case apiErr.Code == 409:
			return fmt.Errorf("natsworld: %s: %w (%w)", op, world.ErrConflict, err)
		case apiErr.Code == 429, apiErr.Code == 408, apiErr.Code >= 500:
			return fmt.Errorf("natsworld: %s: %w (%w)", op, world.ErrTransient, err)
		}
	}
	return fmt.Errorf("natsworld: %s: %w", op, err)
}

// statusErr turns a status-only reply (direct get, pull) into an error.
func statusErr(m *nats.Msg) error {
	code := m.Header.Get("Status")
	desc := m.Header.Get("Description")
	switch code {
	case "404":
		return fmt.Errorf("%w: %s", jetstream.ErrMsgNotFound, desc)
	case "408", "409":
		return fmt.Errorf("natsworld: request rejected: %s %s", code, desc)
	case "503":
		return fmt.Errorf("%w: %s", nats.ErrNoResponders, desc)
	}
	return fmt.Errorf("natsworld: unexpected status %s %s", code, desc)
}
