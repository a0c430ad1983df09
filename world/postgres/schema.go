package pgworld

import (
	"strconv"
	"strings"
)

// The schema of one world, created under its own PostgreSQL schema (the
// prefix). {S} is the schema's quoted name, {CH} the NOTIFY channel's name
// as an SQL string literal. Every rule of world.Log is checked by the
// append function in the statement that appends, under the run row's lock
// (taken by the database, for the statement's transaction): durabench
// holds no lock of its own, and any number of processes may append to a
// run.
const schemaDDL = `
CREATE SCHEMA IF NOT EXISTS {S};

-- Runs; last_pos is the run's log position, pending its created and
-- unfinished steps, status 0 pending, 1 running, 2 completed, 3 failed.
CREATE TABLE IF NOT EXISTS {S}.runs (
	id           text PRIMARY KEY,
	seq          bigint GENERATED ALWAYS AS IDENTITY,
	deployment   text NOT NULL,
	spec_version int NOT NULL,
	input        bytea,
	status       smallint NOT NULL DEFAULT 0,
	last_pos     bigint NOT NULL DEFAULT 1,
	pending      int NOT NULL DEFAULT 0
);

-- The per-run event log. UNIQUE (run, id) is the idempotency key (NULL ids
-- never clash).
CREATE TABLE IF NOT EXISTS {S}.events (
	run    text NOT NULL REFERENCES {S}.runs (id),
	pos    bigint NOT NULL,
	kind   smallint NOT NULL,
	id     text,
	entity text NOT NULL DEFAULT '',
	data   bytea,
	PRIMARY KEY (run, pos),
	UNIQUE (run, id)
);

-- Step entities: one row per step_created, done once a terminal event is
-- appended.
CREATE TABLE IF NOT EXISTS {S}.steps (
	run  text NOT NULL,
	id   text NOT NULL,
	done bool NOT NULL DEFAULT false,
	PRIMARY KEY (run, id)
);

-- Hook tokens, unique across runs.
CREATE TABLE IF NOT EXISTS {S}.hooks (
	token text PRIMARY KEY,
	run   text NOT NULL
);

-- The queue: a row per message (a fresh retry is a new row with the same
-- id). attempt counts deliveries; a claim makes the row invisible until
-- visible_at (the visibility timeout); failures counts the failed
-- deliveries of the message's lineage (the retry delay doubles with it).
CREATE TABLE IF NOT EXISTS {S}.queue (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text NOT NULL,
	run        text NOT NULL,
	body       bytea,
	attempt    int NOT NULL DEFAULT 0,
	failures   int NOT NULL DEFAULT 0,
	visible_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_visible ON {S}.queue (visible_at, seq);

-- Every message id ever published, for the world's life.
CREATE TABLE IF NOT EXISTS {S}.published (
	id text PRIMARY KEY
);

-- Streams and their chunks; next is the index the next chunk must have.
CREATE TABLE IF NOT EXISTS {S}.streams (
	name   text PRIMARY KEY,
	next   int NOT NULL DEFAULT 0,
	closed bool NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS {S}.chunks (
	stream     text NOT NULL,
	idx        int NOT NULL,
	data       bytea,
	written_at bigint NOT NULL,
	PRIMARY KEY (stream, idx)
);

-- append appends a batch of events to one run, in their order: for each,
-- world.Log's rules in their order, then the event at the run's next
-- position. A broken rule appends nothing for that event and reports its
-- SQLSTATE (DB404, DB409, DB410, DB412) in the event's row; the others go
-- on. One row per event: its position, whether it was a duplicate, the
-- pending count after it, the SQLSTATE and message of a broken rule.
CREATE OR REPLACE FUNCTION {S}.append(p_run text, p_kinds smallint[], p_ids text[], p_entities text[],
	p_datas bytea[], p_guards bool[], p_lasts bigint[])
RETURNS TABLE (o_pos bigint, o_dup bool, o_pending int, o_code text, o_msg text)
LANGUAGE plpgsql AS $fn$
DECLARE
	v_run record;
	v_last bigint;
	v_pending int;
	v_status smallint;
	v_kind smallint;
	v_id text;
	v_entity text;
	v_done bool;
BEGIN
	-- The run row's lock orders this run's appends, from any process; it is
	-- held to commit.
	SELECT r.status, r.last_pos, r.pending INTO v_run FROM {S}.runs r WHERE r.id = p_run FOR UPDATE;
	IF NOT FOUND THEN
		FOR i IN 1 .. cardinality(p_kinds) LOOP
			o_pos := 0; o_dup := false; o_pending := 0;
			o_code := 'DB404'; o_msg := format('run %s not found', p_run);
			RETURN NEXT;
		END LOOP;
		RETURN;
	END IF;
	v_last := v_run.last_pos;
	v_pending := v_run.pending;
	v_status := v_run.status;
	FOR i IN 1 .. cardinality(p_kinds) LOOP
		v_kind := p_kinds[i];
		v_id := nullif(p_ids[i], '');
		v_entity := p_entities[i];
		o_pos := 0; o_dup := false; o_pending := v_pending; o_code := NULL; o_msg := NULL;
		IF v_id IS NOT NULL THEN
			SELECT e.pos INTO o_pos FROM {S}.events e WHERE e.run = p_run AND e.id = v_id;
			IF FOUND THEN
				o_dup := true;
				RETURN NEXT;
				CONTINUE;
			END IF;
			o_pos := 0;
		END IF;
		IF v_status >= 2 THEN
			o_code := 'DB410'; o_msg := format('run %s is finished', p_run);
		ELSIF p_guards[i] AND v_last <> p_lasts[i] THEN
			o_code := 'DB412'; o_msg := format('run %s: last position %s, writer saw %s', p_run, v_last, p_lasts[i]);
		ELSIF v_kind = 5 THEN -- step_created: the primary key finds a second one
			INSERT INTO {S}.steps (run, id) VALUES (p_run, v_entity) ON CONFLICT DO NOTHING;
			IF NOT FOUND THEN
				o_code := 'DB409'; o_msg := format('step %s of run %s already created', v_entity, p_run);
			ELSE
				v_pending := v_pending + 1;
			END IF;
		ELSIF v_kind IN (6, 9) THEN -- step_started, step_retrying
			SELECT s.done INTO v_done FROM {S}.steps s WHERE s.run = p_run AND s.id = v_entity;
			IF NOT FOUND THEN
				o_code := 'DB404'; o_msg := format('step %s of run %s not created', v_entity, p_run);
			ELSIF v_done THEN
				o_code := 'DB409'; o_msg := format('step %s of run %s is finished', v_entity, p_run);
			END IF;
		ELSIF v_kind IN (7, 8) THEN -- step_completed, step_failed
			UPDATE {S}.steps s SET done = true WHERE s.run = p_run AND s.id = v_entity AND NOT s.done;
			IF FOUND THEN
				v_pending := v_pending - 1;
			ELSE
				PERFORM 1 FROM {S}.steps s WHERE s.run = p_run AND s.id = v_entity;
				IF FOUND THEN
					o_code := 'DB409'; o_msg := format('step %s of run %s is finished', v_entity, p_run);
				ELSE
					o_code := 'DB404'; o_msg := format('step %s of run %s not created', v_entity, p_run);
				END IF;
			END IF;
		ELSIF v_kind = 10 THEN -- hook_created: the primary key finds a token taken, by any run
			INSERT INTO {S}.hooks (token, run) VALUES (v_entity, p_run) ON CONFLICT DO NOTHING;
			IF NOT FOUND THEN
				o_code := 'DB409'; o_msg := format('hook %s already created', v_entity);
			END IF;
		ELSIF v_kind = 11 THEN -- hook_received
			PERFORM 1 FROM {S}.hooks h WHERE h.token = v_entity AND h.run = p_run;
			IF NOT FOUND THEN
				o_code := 'DB404'; o_msg := format('hook %s of run %s not created', v_entity, p_run);
			END IF;
		END IF;
		IF o_code IS NULL THEN
			v_last := v_last + 1;
			INSERT INTO {S}.events (run, pos, kind, id, entity, data) VALUES (p_run, v_last, v_kind, v_id, v_entity, p_datas[i]);
			v_status := CASE v_kind WHEN 2 THEN 1 WHEN 3 THEN 2 WHEN 4 THEN 3 ELSE v_status END;
			o_pos := v_last;
			o_pending := v_pending;
		END IF;
		RETURN NEXT;
	END LOOP;
	IF v_last <> v_run.last_pos THEN
		UPDATE {S}.runs r SET last_pos = v_last, pending = v_pending, status = v_status WHERE r.id = p_run;
	END IF;
END
$fn$;

-- write_chunk appends a chunk at the stream's next index (DB409 otherwise;
-- DB410 on a closed stream) and wakes the stream's readers.
CREATE OR REPLACE FUNCTION {S}.write_chunk(p_stream text, p_idx int, p_data bytea, p_at bigint)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
	s record;
BEGIN
	INSERT INTO {S}.streams (name) VALUES (p_stream) ON CONFLICT DO NOTHING;
	SELECT next, closed INTO s FROM {S}.streams WHERE name = p_stream FOR UPDATE;
	IF s.closed THEN
		RAISE EXCEPTION USING ERRCODE = 'DB410', MESSAGE = format('stream %s is closed', p_stream);
	END IF;
	IF p_idx <> s.next THEN
		RAISE EXCEPTION USING ERRCODE = 'DB409', MESSAGE = format('stream %s: chunk %s, next is %s', p_stream, p_idx, s.next);
	END IF;
	INSERT INTO {S}.chunks (stream, idx, data, written_at) VALUES (p_stream, p_idx, p_data, p_at);
	UPDATE {S}.streams SET next = next + 1 WHERE name = p_stream;
	PERFORM pg_notify({CH}, 's' || p_stream);
END
$fn$;
`

// queries are the statements of one world, its schema and channel filled in.
type queries struct {
	ddl, drop string

	createRun, getRun, listRuns string
	append, load, hookRun       string

	publish         string
	claim           string
	ack, nak, fresh string

	writeChunk, readChunks, closeStream string
}

// maxChunksPerRead bounds one ReadChunks; closed is reported only with the
// last chunk.
const maxChunksPerRead = 1024

func newQueries(schema, channel string, vtMicros int64) queries {
	s := quoteIdent(schema)
	ch := quoteLiteral(channel)
	vt := strconv.FormatInt(vtMicros, 10)
	r := strings.NewReplacer("{S}", s, "{CH}", ch, "{VT}", vt, "{MAXCHUNKS}", strconv.Itoa(maxChunksPerRead))
	return queries{
		ddl:  r.Replace(schemaDDL),
		drop: r.Replace(`DROP SCHEMA IF EXISTS {S} CASCADE`),

		createRun: r.Replace(`WITH r AS (
	INSERT INTO {S}.runs (id, deployment, spec_version, input) VALUES ($1, $2, $3, $4) RETURNING id)
INSERT INTO {S}.events (run, pos, kind) SELECT id, 1, 1 FROM r`),
		getRun:   r.Replace(`SELECT deployment, spec_version, input, status FROM {S}.runs WHERE id = $1`),
		listRuns: r.Replace(`SELECT id FROM {S}.runs ORDER BY seq`),
		append:   r.Replace(`SELECT o_pos, o_dup, o_pending, coalesce(o_code, ''), coalesce(o_msg, '') FROM {S}.append($1, $2, $3, $4, $5, $6, $7)`),
		load:     r.Replace(`SELECT pos, kind, coalesce(id, ''), entity, data FROM {S}.events WHERE run = $1 ORDER BY pos`),
		hookRun:  r.Replace(`SELECT run FROM {S}.hooks WHERE token = $1`),

		// publish enqueues a batch of messages ($1 ids, $2 runs, $3
		// bodies, $4 delays in µs) in one statement: the first of the
		// batch's messages with each id goes into published, and, when the
		// primary key took it, into queue (a message without an id always
		// does), in the batch's order; one NOTIFY when any did. The rows
		// are the (1-based) places of the messages enqueued; the others
		// are duplicates.
		publish: r.Replace(`WITH m AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[]) WITH ORDINALITY AS m(id, run, body, delay_us, ord)),
f AS (
	SELECT DISTINCT ON (CASE WHEN id = '' THEN ord::text ELSE id END) * FROM m
	ORDER BY CASE WHEN id = '' THEN ord::text ELSE id END, ord),
k AS (
	INSERT INTO {S}.published (id) SELECT id FROM f WHERE id <> '' ON CONFLICT DO NOTHING RETURNING id),
e AS (
	SELECT * FROM f WHERE id = '' OR id IN (SELECT id FROM k)),
q AS (
	INSERT INTO {S}.queue (id, run, body, visible_at)
	SELECT id, run, body, now() + delay_us * interval '1 microsecond' FROM e ORDER BY ord RETURNING 1)
SELECT e.ord FROM e, (SELECT pg_notify({CH}, 'q') WHERE EXISTS (SELECT 1 FROM q)) n`),
		// claim takes up to $1 visible messages (rows other consumers are
		// claiming are skipped, not waited for), makes them invisible for
		// the visibility timeout and counts the attempt; the last row (seq
		// 0) says in how many microseconds the next message becomes
		// visible (-1: none is waiting).
		claim: r.Replace(`WITH c AS (
	SELECT seq FROM {S}.queue WHERE visible_at <= now() ORDER BY visible_at, seq LIMIT $1 FOR UPDATE SKIP LOCKED),
u AS (
	UPDATE {S}.queue q SET attempt = q.attempt + 1, visible_at = now() + {VT} * interval '1 microsecond'
	FROM c WHERE q.seq = c.seq
	RETURNING q.seq, q.id, q.run, q.body, q.attempt, q.failures)
SELECT seq, id, run, body, attempt, failures, 0::bigint FROM u
UNION ALL
SELECT 0, '', '', NULL, 0, 0, coalesce((extract(epoch FROM min(visible_at) - now()) * 1000000)::bigint, -1)
FROM {S}.queue WHERE visible_at > now()`),
		// Any delivery's ack settles the message, even a stale one: the
		// work was done. $1: the seqs of a batch of acks.
		ack: r.Replace(`DELETE FROM {S}.queue WHERE seq = ANY($1::bigint[])`),
		// Redeliver: the same row comes back after the retry delay — if
		// this delivery is still the message's current one.
		nak: r.Replace(`WITH u AS (
	UPDATE {S}.queue SET visible_at = now() + $3::bigint * interval '1 microsecond', failures = failures + 1
	WHERE seq = $1 AND attempt = $2 RETURNING 1)
SELECT pg_notify({CH}, 'q') FROM u`),
		// Fresh: a copy (attempt 0, delivered as 1) after the retry delay;
		// the original stays invisible until its visibility timeout.
		fresh: r.Replace(`WITH o AS (
	UPDATE {S}.queue SET failures = failures + 1 WHERE seq = $1 AND attempt = $2
	RETURNING id, run, body, failures),
n AS (
	INSERT INTO {S}.queue (id, run, body, failures, visible_at)
	SELECT id, run, body, failures, now() + $3::bigint * interval '1 microsecond' FROM o RETURNING 1)
SELECT pg_notify({CH}, 'q') FROM n`),

		writeChunk: r.Replace(`SELECT {S}.write_chunk($1, $2, $3, $4)`),
		// One snapshot: the chunks from $2 and whether the stream is
		// closed; next tells whether the last chunk was among them.
		readChunks: r.Replace(`SELECT s.closed, s.next, c.idx, c.data, c.written_at
FROM {S}.streams s LEFT JOIN LATERAL (
	SELECT idx, data, written_at FROM {S}.chunks WHERE stream = s.name AND idx >= $2 ORDER BY idx LIMIT {MAXCHUNKS}) c ON true
WHERE s.name = $1 ORDER BY c.idx`),
		closeStream: r.Replace(`WITH u AS (
	INSERT INTO {S}.streams (name, closed) VALUES ($1, true)
	ON CONFLICT (name) DO UPDATE SET closed = true RETURNING 1)
SELECT pg_notify({CH}, 's' || $1) FROM u`),
	}
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral quotes an SQL string literal.
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
