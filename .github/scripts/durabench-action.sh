#!/usr/bin/env bash
# The shell steps of the durabench GitHub Action (action.yml at the
# repository root), one subcommand per step. Every input reaches it as an
# environment variable set by action.yml (INPUT_*, DURABENCH_*); the
# action's files are under GITHUB_ACTION_PATH, the consumer's checkout is
# the working directory. cmd/durabench's TestAction runs these steps, in
# action.yml's order, against a recording stand-in for the GitHub API.
set -euo pipefail

step=${1:?usage: durabench-action.sh STEP}
out=${DURABENCH_OUT:?}
bin_dir=${DURABENCH_BIN:?}
durabench="$bin_dir/durabench"
mkdir -p "$out"

# sweep_args reads the sweep's settings from the inputs into the array args.
sweep_args() {
	args=()
	if [ -n "${INPUT_SWEEP_FILE:-}" ]; then
		args+=(-f "$1/$INPUT_SWEEP_FILE")
	fi
	if [ -n "${INPUT_SWEEP_FLAGS:-}" ]; then
		local flags
		read -ra flags <<< "$INPUT_SWEEP_FLAGS"
		args+=("${flags[@]}")
	fi
	if [ -n "${INPUT_TARGETS:-}" ]; then
		args+=(--targets "$INPUT_TARGETS")
	fi
}

# build runs the consumer's build command in directory $1 with the
# engine's binaries going to $2 (on PATH for the sweep: adapters are found
# there as durabench-target-NAME).
build() {
	if [ -z "${INPUT_BUILD:-}" ]; then
		return 0
	fi
	mkdir -p "$2"
	(cd "$1" && DURABENCH_BIN="$2" bash -eo pipefail -c "$INPUT_BUILD")
}

# prepare_baseline checks the baseline ref out beside the workspace (once)
# and builds it with the consumer's command; it fails with a warning.
prepare_baseline() {
	tree="$RUNNER_TEMP/durabench-baseline"
	if [ -f "$tree.prepared" ]; then
		return 0
	fi
	rm -rf "$tree" "$tree.prepared"
	git fetch --no-tags --depth=1 origin "$DURABENCH_BASELINE_REF" 2>/dev/null || true
	if ! git worktree add --detach "$tree" "$DURABENCH_BASELINE_REF"; then
		echo "::warning::durabench: baseline $DURABENCH_BASELINE_REF cannot be checked out; the report shows the head alone"
		return 1
	fi
	if ! build "$tree" "$out/bin-base"; then
		echo "::warning::durabench: the baseline $DURABENCH_BASELINE_REF does not build; the report shows the head alone"
		return 1
	fi
	touch "$tree.prepared"
}

# sweep_baseline sweeps the prepared baseline into directory $1 (removed,
# with a warning naming $2, when the sweep fails).
sweep_baseline() {
	sweep_args "$tree"
	if ! (cd "$tree" && PATH="$out/bin-base:$PATH" "$durabench" sweep "${args[@]}" --quiet --out "$1"); then
		echo "::warning::durabench: the $2 sweep failed"
		rm -rf "$1"
		return 1
	fi
}

# interleaved says whether this job sweeps base and head in one sweep
# (interleave input; decided by sweep-head, which leaves $out/interleaved).
interleaved() { [ -f "$out/interleaved" ]; }

# interleave_design decides the interleave input: it prints the adapter
# name when base and head are to run in one interleaved sweep (its two
# builds as two targets, NAME-base and NAME), nothing for two sweeps.
# auto interleaves when it can: one adapter in targets, a build command, a
# baseline ref to build, no baseline-results file and no null sweep;
# true fails the job (exit 2) when it cannot.
interleave_design() {
	local want=${INPUT_INTERLEAVE:-auto} why=""
	case "$want" in
	auto | true | false) ;;
	*)
		echo "::error::durabench: interleave: $want is not auto, true or false" >&2
		exit 2
		;;
	esac
	[ "$want" != false ] || return 0
	local t=${INPUT_TARGETS:-}
	if [ -n "${INPUT_BASELINE_RESULTS:-}" ]; then
		why="baseline-results is a file, not a build to sweep beside the head"
	elif [ -z "${DURABENCH_BASELINE_REF:-}" ]; then
		why="there is no baseline ref (not a pull request, no baseline-ref)"
	elif [ "$(null_mode)" != false ]; then
		why="null-sweep sweeps base and head apart"
	elif [ -z "${INPUT_BUILD:-}" ]; then
		why="without a build command base and head are the same adapter"
	elif ! [[ "$t" =~ ^[a-z0-9][a-z0-9-]*$ ]] || [ "$t" = reference ]; then
		why="targets is not one adapter name (base and head are its two builds)"
	fi
	if [ -n "$why" ]; then
		if [ "$want" = true ]; then
			echo "::error::durabench: interleave: true, but $why" >&2
			exit 2
		fi
		return 0
	fi
	echo "$t"
}

# null_mode is the null-sweep input: aba (true is aba), abab or false.
null_mode() {
	case "${INPUT_NULL_SWEEP:-false}" in
	true | aba | ABA) echo aba ;;
	abab | ABAB) echo abab ;;
	false | "") echo false ;;
	*)
		echo "::error::durabench: null-sweep: $INPUT_NULL_SWEEP is not aba, abab, true or false" >&2
		exit 2
		;;
	esac
}

case "$step" in
key)
	# The cache key of the durabench binary: the action's own sources, so
	# a moving tag (v1) never serves a stale build.
	sum=$(cd "$GITHUB_ACTION_PATH" && find . -path ./.git -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print |
		LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
	echo "key=durabench-bin-${RUNNER_OS:-os}-$(go env GOARCH)-$(go env GOVERSION)-$sum" >> "$GITHUB_OUTPUT"
	;;
install)
	# go install at the action's version, unless the cache restored it.
	if [ ! -x "$durabench" ]; then
		(cd "$GITHUB_ACTION_PATH" && GOBIN="$bin_dir" go install ./cmd/durabench)
	fi
	"$durabench" help | head -n 1
	;;
running)
	"$durabench" report --status running --commit "$DURABENCH_SHA" --run-url "$DURABENCH_RUN_URL" > "$out/comment.md"
	;;
sweep-head)
	name=$(interleave_design)
	if [ -n "$name" ] && prepare_baseline; then
		# Interleaved: base and head in one sweep, as two targets run by
		# run in balanced blocks (sweep --interleave): the baseline's build
		# is NAME-base (run from its checkout, as when it is swept alone),
		# the head's NAME. One results file holds both sides.
		build . "$out/bin-head"
		mkdir -p "$out/bin-pair"
		printf '#!/bin/sh\ncd "%s" && exec "%s" "$@"\n' "$tree" "$out/bin-base/durabench-target-$name" > "$out/bin-pair/durabench-target-$name-base"
		chmod +x "$out/bin-pair/durabench-target-$name-base"
		INPUT_TARGETS="$name-base,$name"
		sweep_args "$PWD"
		touch "$out/interleaved"
		# In rounds, both adapters started afresh before each: an
		# adapter process draws its own speed once per process.
		if [ "${INPUT_ROUNDS:-0}" != 0 ]; then
			args+=(--rounds "$INPUT_ROUNDS")
		fi
		PATH="$out/bin-pair:$out/bin-head:$PATH" "$durabench" sweep "${args[@]}" --interleave --quiet --out "$out/head"
		echo "results=$out/head/results.json" >> "$GITHUB_OUTPUT"
		exit 0
	fi
	build . "$out/bin-head"
	sweep_args "$PWD"
	PATH="$out/bin-head:$PATH" "$durabench" sweep "${args[@]}" --quiet --out "$out/head"
	echo "results=$out/head/results.json" >> "$GITHUB_OUTPUT"
	;;
baseline)
	# A baseline file given (an artifact of an earlier run) is used as it
	# is; otherwise the baseline ref is checked out beside the workspace,
	# built with the same command and swept with the same settings. A
	# baseline that cannot be had leaves none: the report shows the head
	# alone and the gate checks only its absolute rules.
	if interleaved; then
		echo "durabench: the baseline ran in the head's sweep, interleaved"
		exit 0
	fi
	if [ -n "${INPUT_BASELINE_RESULTS:-}" ]; then
		mkdir -p "$out/base"
		cp "$INPUT_BASELINE_RESULTS" "$out/base/results.json"
		exit 0
	fi
	if [ -z "${DURABENCH_BASELINE_REF:-}" ]; then
		echo "durabench: no baseline (no baseline-ref or baseline-results, and not a pull request)"
		exit 0
	fi
	mode=$(null_mode)
	if [ "$mode" != false ]; then
		# ABA: the baseline was swept before the head (baseline-first);
		# sweep it again now, so drift over the job hits both sides.
		if [ -f "$out/base/results.json" ] && prepare_baseline; then
			sweep_baseline "$out/null" "second baseline (null)" || true
		fi
		exit 0
	fi
	prepare_baseline || exit 0
	sweep_baseline "$out/base" "baseline (the report shows the head alone)" || true
	;;
baseline-first)
	# With null-sweep, the baseline is swept before the head and again
	# after it (ABA); without it this step does nothing.
	mode=$(null_mode)
	[ "$mode" != false ] || exit 0
	if [ -n "${INPUT_BASELINE_RESULTS:-}" ]; then
		echo "::warning::durabench: null-sweep sweeps baseline-ref twice; with baseline-results there is no baseline to sweep again"
		exit 0
	fi
	if [ -z "${DURABENCH_BASELINE_REF:-}" ]; then
		echo "durabench: no baseline to sweep twice (no baseline-ref, and not a pull request)"
		exit 0
	fi
	prepare_baseline || exit 0
	sweep_baseline "$out/base" "baseline (the report shows the head alone)" || true
	;;
head-again)
	# null-sweep: abab sweeps the head a second time, after the second
	# baseline (base, head, base, head), into head2; the gate then fails a
	# relative rule only when both pairs fail (durabench gate --again).
	mode=$(null_mode)
	if [ "$mode" != abab ] || [ ! -f "$out/null/results.json" ]; then
		exit 0
	fi
	sweep_args "$PWD"
	if ! PATH="$out/bin-head:$PATH" "$durabench" sweep "${args[@]}" --quiet --out "$out/head2"; then
		# The first head's sweep succeeded with the same settings: a second
		# one that fails is a failed sweep, not a missing check.
		echo "::error::durabench: the second head sweep (ABAB) failed"
		exit 3
	fi
	;;
render)
	args=()
	if [ -f "$out/base/results.json" ]; then
		args+=(--baseline "$out/base/results.json")
		if [ -f "$out/null/results.json" ]; then
			args+=(--null "$out/null/results.json")
		fi
	fi
	if [ -n "${DURABENCH_HISTORY_DIR:-}" ] && [ -d "$DURABENCH_HISTORY_DIR" ]; then
		args+=(--history "$DURABENCH_HISTORY_DIR")
	fi
	"$durabench" report "$out/head/results.json" "${args[@]}" --format github --png "$out/charts" > "$out/comment.md"
	"$durabench" report "$out/head/results.json" "${args[@]}" --format md >> "$GITHUB_STEP_SUMMARY"
	echo "comment=$out/comment.md" >> "$GITHUB_OUTPUT"
	;;
failed)
	if [ -x "$durabench" ]; then
		"$durabench" report --status failed --commit "$DURABENCH_SHA" --run-url "$DURABENCH_RUN_URL" > "$out/comment.md"
	else
		# durabench itself did not install: nothing to render with.
		{
			echo '<!-- durabench-benchmark -->'
			echo '## 📊 Durable Workflow Benchmarks — ❌ failed'
			echo
			echo "durabench did not install; see the [run logs]($DURABENCH_RUN_URL)."
		} > "$out/comment.md"
	fi
	cat "$out/comment.md" >> "$GITHUB_STEP_SUMMARY"
	;;
history-add)
	"$durabench" history add "$out/head/results.json" --dir "$DURABENCH_HISTORY_DIR"
	;;
gate)
	# Last, so the comment and the artifacts exist whatever the verdict:
	# exit 1 is a regression, 2 bad rules or input, 3 a failed sweep.
	args=()
	if [ -f "$out/base/results.json" ]; then
		args+=(--baseline "$out/base/results.json")
		if [ -f "$out/null/results.json" ]; then
			args+=(--null "$out/null/results.json")
			if [ -f "$out/head2/results.json" ]; then
				args+=(--again "$out/head2/results.json")
			fi
		fi
	fi
	if [ -n "${INPUT_GATE_RULES:-}" ]; then
		args+=(--rules "$INPUT_GATE_RULES")
	elif [ ! -f "$out/base/results.json" ] && ! interleaved; then
		echo "durabench: no baseline and no gate rules: nothing to gate"
		echo "gate=skipped" >> "$GITHUB_OUTPUT"
		exit 0
	fi
	code=0
	"$durabench" gate "$out/head/results.json" "${args[@]}" --format md > "$out/gate.md" || code=$?
	cat "$out/gate.md"
	cat "$out/gate.md" >> "$GITHUB_STEP_SUMMARY"
	if [ "$code" = 0 ]; then
		echo "gate=passed" >> "$GITHUB_OUTPUT"
	else
		echo "gate=failed" >> "$GITHUB_OUTPUT"
	fi
	if [ "$code" != 0 ] && [ "${INPUT_FAIL_ON_GATE:-true}" = true ]; then
		exit "$code"
	fi
	;;
*)
	echo "durabench-action.sh: unknown step $step" >&2
	exit 2
	;;
esac
