package natsworld

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// storedMsg is one message read back from a stream.
type storedMsg struct {
	Seq  uint64
	Data []byte
}

// directBatchMax is how many messages one direct-get batch asks for, and
// directMaxBytes how many bytes (the server stops after the message that
// crosses it); a longer log takes several requests. readSlots bounds the
// reads in flight, so what the server may have sent and the client not yet
// taken is at most readSlots × directMaxBytes (plus one message each):
// 32 MiB, under both the reply subscription's pending limit (replyPending)
// and the server's per-connection outbound limit (64 MiB by default), so a
// burst of reads cannot overflow either.
const (
	directBatchMax = 4096
	directMaxBytes = 512 << 10
	readSlots      = 64
	replyPending   = 2 * readSlots * directMaxBytes
	// hdrAllowance is what a stored message's headers may add to the
	// server's byte count (ours carry a message id and an expected
	// sequence: about 120 bytes): a batch cut short by max_bytes is
	// recognised as such even though the reply carries no headers.
	hdrAllowance = 256
)

// readSubject returns the payloads of the messages stored on subj with a
// sequence >= from, in order, and the sequence of the last one (0 when
// there is none), in one round trip per batch: a batched direct get
// ($JS.API.DIRECT.GET) streams them back followed by an end-of-batch
// status that carries the last sequence. Headers are not requested: the
// server would rebuild every stored header block to add its own, which
// costs more than the rest of the read. On a replicated stream a follower
// may answer; callers that know a sequence that must be present pass it as
// atLeast, and a missing tail is then read from the leader.
func (w *World) readSubject(ctx context.Context, stream, subj string, from, atLeast uint64) ([][]byte, uint64, error) {
	if from == 0 {
		from = 1
	}
	var (
		out  [][]byte
		last uint64
	)
	for {
		batch, lseq, more, err := w.directBatch(ctx, stream, subj, from, directBatchMax)
		if err != nil {
			return nil, 0, err
		}
		if len(batch) == 0 {
			break
		}
		if out == nil {
			out = batch
		} else {
			out = append(out, batch...)
		}
		last, from = lseq, lseq+1
		if !more {
			break
		}
	}
	// Read-your-writes on replicated streams: a follower that has not
	// applied our last append yet answered; fill the tail from the leader.
	for last < atLeast {
		m, err := w.leaderNext(ctx, stream, subj, from)
		if err != nil {
			return nil, 0, err
		}
		if m == nil {
			break
		}
		out = append(out, m.Data)
		last, from = m.Seq, m.Seq+1
	}
	return out, last, nil
}

// directBatch performs one batched direct get of up to n payloads. lseq is
// the sequence of the last one; more reports that messages may be left
// after the batch. Its replies come through the world's reply mux: a reply
// the client had to drop fails the call with a transient error at once
// instead of returning a batch with a hole.
func (w *World) directBatch(ctx context.Context, stream, subj string, from uint64, n int) (out [][]byte, lseq uint64, more bool, err error) {
	req, _ := json.Marshal(struct {
		Seq      uint64 `json:"seq"`
		NextFor  string `json:"next_by_subj"`
		Batch    int    `json:"batch"`
		MaxBytes int    `json:"max_bytes"`
		NoHdr    bool   `json:"no_hdr"`
	}{from, subj, n, directMaxBytes, true})
	call, err := w.replies.start(ctx, n)
	if err != nil {
		return nil, 0, false, err
	}
	defer w.replies.finish(call)
	if err := w.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, call.inbox, req); err != nil {
		return nil, 0, false, err
	}
	end, err := w.replies.wait(ctx, call, opTimeout)
	if err != nil {
		return nil, 0, false, err
	}
	out = call.datas
	switch end.Header.Get("Status") {
	case "204": // end of batch
		lseq, _ = strconv.ParseUint(end.Header.Get(jetstream.LastSequenceHeader), 10, 64)
		if len(out) > 0 && lseq == 0 {
			return nil, 0, false, fmt.Errorf("natsworld: direct get: end of batch without a last sequence")
		}
		// Without headers the server does not count Nats-Num-Pending
		// down: it is the count at the start of the read (or, when the
		// stream grew meanwhile, what is left after the batch). So the
		// batch may be followed by more when it is full, when the server
		// says more than it sent are pending, or when max_bytes may have
		// cut it.
		np, _ := strconv.ParseUint(end.Header.Get("Nats-Num-Pending"), 10, 64)
		size := len(out) * (len(subj) + hdrAllowance)
		for _, d := range out {
			size += len(d)
		}
		more = len(out) >= n || np > uint64(len(out)) || size >= directMaxBytes/2
		return out, lseq, more, nil
	case "404":
		return out, 0, false, nil
	default:
		return nil, 0, false, statusErr(end)
	}
}

// leaderNext reads the first message on subj with sequence >= from through
// the stream leader ($JS.API.STREAM.MSG.GET); nil when there is none.
func (w *World) leaderNext(ctx context.Context, stream, subj string, from uint64) (*storedMsg, error) {
	req, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
	}{from, subj})
	return w.leaderGet(ctx, stream, req)
}

// leaderLast reads the last message on subj through the stream leader; nil
// when there is none.
func (w *World) leaderLast(ctx context.Context, stream, subj string) (*storedMsg, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subj})
	return w.leaderGet(ctx, stream, req)
}

func (w *World) leaderGet(ctx context.Context, stream string, req []byte) (*storedMsg, error) {
	m, err := w.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("natsworld: msg get: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == codeMessageNotFound {
			return nil, nil
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	return &storedMsg{Seq: resp.Message.Seq, Data: resp.Message.Data}, nil
}

// lastOrAbsent is lastOnSubject for a read whose "none" makes the caller
// drop work (a run or a hook that does not exist). On a replicated stream a
// direct get may be answered by a replica that has not yet stored what
// another process wrote, and this process's own writes (atLeast) cannot
// tell; so a miss there is asked again of the leader.
func (w *World) lastOrAbsent(ctx context.Context, stream, subj string, atLeast uint64) (*storedMsg, error) {
	m, err := w.lastOnSubject(ctx, stream, subj, atLeast)
	if err != nil || m != nil || w.cfg.Replicas <= 1 {
		return m, err
	}
	return w.leaderLast(ctx, stream, subj)
}

// lastOnSubject returns the last message on subj (nil when there is none),
// through a direct get, falling back to the leader when the answer is older
// than atLeast.
func (w *World) lastOnSubject(ctx context.Context, stream, subj string, atLeast uint64) (*storedMsg, error) {
	m, err := w.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subj, nil)
	if err != nil {
		return nil, err
	}
	var got *storedMsg
	if len(m.Data) == 0 && m.Header.Get("Status") != "" {
		if m.Header.Get("Status") != "404" {
			return nil, statusErr(m)
		}
	} else {
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("natsworld: direct get: bad sequence header: %w", err)
		}
		got = &storedMsg{Seq: seq, Data: m.Data}
	}
	if atLeast == 0 || got != nil && got.Seq >= atLeast {
		return got, nil
	}
	// Stale follower: ask the leader.
	return w.leaderLast(ctx, stream, subj)
}
