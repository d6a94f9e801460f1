#!/usr/bin/env bash
# Speed of ablate's embedded model against llama.cpp's own speed on the same
# GGUF file, the same llama.cpp build and the same threads.
#
# The reference (benches/llama_ref.cpp) is compiled against the libllama and
# libggml that the llama-cpp-sys-2 crate built for the bench binary, and it
# measures the way llama-bench does. The two run alternately, `rounds` times,
# so that drift of the machine's speed hits both; each run is the mean of
# ABLATE_BENCH_REPS (5) repetitions. Then the prefix-reuse and sampling parts run once.
#
# Usage: benches/local.sh [rounds=3]    (make bench-local; run on an idle machine)
# Environment: ABLATE_LOCAL_THREADS (default: every core), ABLATE_LOCAL_SLOTS,
# ABLATE_BENCH_MODEL (default: the Qwen2.5-Coder-0.5B file from `make model`).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
model=${ABLATE_BENCH_MODEL:-models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
threads=${ABLATE_LOCAL_THREADS:-$(nproc)}
slots=${ABLATE_LOCAL_SLOTS:-4}
context=4096 # tokens per slot, the default of a `local` model
[ -f "$model" ] || { echo "$model is missing: run make model" >&2; exit 2; }

bench=$(cargo bench -p ablate --bench local --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)
[ -x "$bench" ] || { echo "cannot find the bench binary" >&2; exit 1; }
profile_dir=$(dirname "$(dirname "$bench")")
out=$(ls -td "$profile_dir"/build/llama-cpp-sys-2-*/out 2>/dev/null | while read -r d; do
  [ -f "$d/lib/libllama.a" ] && echo "$d"; done | head -1)
[ -n "$out" ] || { echo "no llama.cpp build under $profile_dir/build" >&2; exit 1; }
openmp=
grep -q '^GGML_OPENMP:BOOL=ON' "$out/build/CMakeCache.txt" 2>/dev/null && openmp=-fopenmp
ref=$(mktemp -d)/llama_ref
trap 'rm -rf "$(dirname "$ref")"' EXIT
g++ -O2 -std=c++17 -I"$out/include" benches/llama_ref.cpp \
  "$out/lib/libllama.a" "$out/lib/libggml.a" "$out/lib/libggml-cpu.a" "$out/lib/libggml-base.a" \
  $openmp -lpthread -ldl -lm -o "$ref"
echo "llama.cpp build: $out"
echo "model $model, $threads threads, $slots slots x $context tokens"

results=$(mktemp)
# ABLATE_BENCH_ONLY=batched runs only the aggregate-throughput table at the end.
[ "${ABLATE_BENCH_ONLY:-}" = batched ] && rounds=0
for r in $(seq 1 "$rounds"); do
  out_r=$(ABLATE_BENCH_MODEL="$model" ABLATE_LOCAL_THREADS="$threads" ABLATE_BENCH_PARTS=speed "$bench" --bench)
  line=$(grep '^ablate local provider' <<<"$out_r")
  echo "round $r: $line"
  echo "round $r: $(grep '^sampled generation' <<<"$out_r")"
  n_prompt=$(sed -n 's/.* pp\([0-9]*\) .*/\1/p' <<<"$line")
  n_gen=$(sed -n 's/.* tg\([0-9]*\) .*/\1/p' <<<"$line")
  depth=$(sed -n 's/.* @ d\([0-9]*\) .*/\1/p' <<<"$line")
  ours_pp=$(sed -n 's/.* pp[0-9]* \([0-9.]*\) tokens.*/\1/p' <<<"$line")
  ours_tg=$(sed -n 's/.* tg[0-9]* @ d[0-9]* \([0-9.]*\) tokens.*/\1/p' <<<"$line")
  line=$("$ref" "$model" "$threads" "$n_prompt" "$n_gen" "$depth" 5 $((context * slots)) "$slots")
  echo "round $r: $line"
  ref_pp=$(sed -n 's/.* pp[0-9]* \([0-9.]*\) tokens.*/\1/p' <<<"$line")
  ref_tg=$(sed -n 's/.* tg[0-9]* @ d[0-9]* \([0-9.]*\) tokens.*/\1/p' <<<"$line")
  echo "$ours_pp $ref_pp $ours_tg $ref_tg" >>"$results"
done
[ "$rounds" -gt 0 ] && python3 - "$results" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
def show(name, i):
    ours = [r[i] for r in rows]; ref = [r[i + 1] for r in rows]
    ratios = [o / f for o, f in zip(ours, ref)]
    print(f"{name:<10} ablate {st.mean(ours):6.1f} tokens/s  llama.cpp {st.mean(ref):6.1f} tokens/s  "
          f"ratio {st.mean(ours) / st.mean(ref):6.1%} (per round {', '.join(f'{x:.0%}' for x in ratios)})")
show("prompt", 0)
show("generation", 2)
PY
rm -f "$results"
[ "$rounds" -gt 0 ] && ABLATE_BENCH_MODEL="$model" ABLATE_LOCAL_THREADS="$threads" ABLATE_BENCH_PARTS=reuse,sampling "$bench" --bench | grep -E '^(4-step|sampling|  logits)'

# Aggregate throughput with 1, 2, 4 and 8 concurrent sequences: ablate's
# continuous batching against llama.cpp's own batched decoding (llama_ref
# batched), same file, build and threads; ~40 prompt tokens and 64 generated
# tokens per sequence, 8 slots of 1024 tokens.
tg=${ABLATE_BENCH_BATCH_GEN:-64}
ours=$(ABLATE_BENCH_MODEL="$model" ABLATE_LOCAL_THREADS="$threads" ABLATE_LOCAL_SLOTS=8 ABLATE_BENCH_REPS=3 ABLATE_BENCH_GEN="$tg" ABLATE_BENCH_PARTS=batched "$bench" --bench | grep '^ablate batched')
theirs=$("$ref" batched "$model" "$threads" 40 "$tg" 1024 1,2,4,8 3)
echo "$ours"
echo "$theirs"
python3 - <<PY
import re
ours = {int(m[0]): float(m[1]) for m in re.findall(r"(\d+) sequences: ([\d.]+) tokens/s", """$ours""")}
ref = {int(m[0]): float(m[1]) for m in re.findall(r"(\d+) sequences: ([\d.]+) tokens/s", """$theirs""")}
print(f"{'sequences':>9} {'ablate tok/s':>13} {'llama.cpp tok/s':>16} {'ratio':>7} {'ablate vs 1':>12} {'llama.cpp vs 1':>15}")
for n in sorted(ours):
    print(f"{n:>9} {ours[n]:>13.1f} {ref.get(n, float('nan')):>16.1f} {ours[n] / ref[n]:>7.1%} {ours[n] / ours[1]:>11.2f}x {ref[n] / ref[1]:>14.2f}x")
PY
