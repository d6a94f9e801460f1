// llama.cpp's own speed, as the reference for benches/local.rs.
//
// Linked against the very libllama/libggml that the llama-cpp-sys-2 crate
// built for ablate (same source, same flags), and measured the way
// llama.cpp's llama-bench measures: random tokens, prompt evaluation in
// batches, generation one token per llama_decode with no sampling, a warm-up
// run, then the mean over repetitions. Built and run by `make bench-local`.
//
// usage: llama_ref batched MODEL THREADS PP TG CTX_PER_SEQ N_LIST REPS
//   aggregate generation throughput the way llama-batched-bench measures it: for each
//   N in N_LIST (e.g. 1,2,4,8), N sequences of PP random prompt tokens evaluated in one
//   batch, then TG steps of one llama_decode holding one token of every sequence;
//   N x TG / (the whole time), mean of REPS after a warm-up.
// usage: llama_ref MODEL THREADS [N_PROMPT=512] [N_GEN=128] [DEPTH=0] [REPS=5] [N_CTX=0] [N_SEQ=1] [POLL=-1] [SAMPLE=0]
// DEPTH tokens are in the KV cache before generation starts (llama-bench's -d).
// N_CTX=0 sizes the context to N_PROMPT + N_GEN + DEPTH, as llama-bench does; N_CTX and
// N_SEQ let the reference use the context layout of ablate's local provider.
// POLL >= 0 attaches a ggml threadpool with that polling level (llama-bench
// uses 50); -1 leaves ggml to its per-call threads. SAMPLE=1 also picks each
// generated token greedily from the logits, as any real generation must.

#include "ggml-cpu.h"
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static double now_s() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

static void quiet(enum ggml_log_level, const char *, void *) {}

static bool eval_prompt(llama_context * ctx, int n_prompt, int n_batch, int n_vocab) {
    std::vector<llama_token> tokens(n_batch);
    for (int done = 0; done < n_prompt;) {
        int n = std::min(n_prompt - done, n_batch);
        for (int i = 0; i < n; i++) tokens[i] = std::rand() % n_vocab;
        if (llama_decode(ctx, llama_batch_get_one(tokens.data(), n)) != 0) return false;
        done += n;
    }
    llama_synchronize(ctx);
    return true;
}

static bool generate(llama_context * ctx, int n_gen, int n_vocab, llama_sampler * greedy) {
    llama_token token = std::rand() % n_vocab;
    for (int i = 0; i < n_gen; i++) {
        if (llama_decode(ctx, llama_batch_get_one(&token, 1)) != 0) return false;
        llama_synchronize(ctx);
        token = greedy ? llama_sampler_sample(greedy, ctx, -1) : std::rand() % n_vocab;
    }
    return true;
}

static void batch_add(llama_batch & b, llama_token t, int pos, int seq, bool logits) {
    const int i = b.n_tokens++;
    b.token[i] = t;
    b.pos[i] = pos;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = seq;
    b.logits[i] = logits;
}

static int batched_main(int argc, char ** argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: llama_ref batched MODEL THREADS PP TG CTX_PER_SEQ N_LIST REPS\n");
        return 2;
    }
    const char * path = argv[1];
    const int threads = atoi(argv[2]), pp = atoi(argv[3]), tg = atoi(argv[4]), per_seq = atoi(argv[5]);
    std::vector<int> list;
    for (char * p = argv[6]; *p;) {
        list.push_back((int) strtol(p, &p, 10));
        if (*p == ',') p++;
    }
    const int reps = atoi(argv[7]);
    const int n_max = *std::max_element(list.begin(), list.end());
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(path, llama_model_default_params());
    if (!model) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = per_seq * n_max;
    cp.n_seq_max = n_max;
    cp.kv_unified = false;
    cp.n_batch = std::max(512, pp * n_max);
    cp.n_ubatch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    llama_memory_t mem = llama_get_memory(ctx);
    llama_batch batch = llama_batch_init(std::max(pp, 1) * n_max + n_max, 0, 1);
    auto run = [&](int n) -> double {
        llama_memory_clear(mem, true);
        double t0 = now_s();
        batch.n_tokens = 0;
        for (int s = 0; s < n; s++)
            for (int i = 0; i < pp; i++) batch_add(batch, std::rand() % n_vocab, i, s, i == pp - 1);
        if (llama_decode(ctx, batch) != 0) return -1;
        for (int t = 0; t < tg; t++) {
            batch.n_tokens = 0;
            for (int s = 0; s < n; s++) batch_add(batch, std::rand() % n_vocab, pp + t, s, true);
            if (llama_decode(ctx, batch) != 0) return -1;
            llama_synchronize(ctx);
        }
        return (double) n * tg / (now_s() - t0);
    };
    for (int n : list) {
        run(n); // warm-up
        double sum = 0;
        for (int r = 0; r < reps; r++) sum += run(n);
        printf("llama.cpp batched, %d threads, pp%d tg%d, %d sequences: %.1f tokens/s (mean of %d)\n", threads, pp, tg, n, sum / reps, reps);
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

int main(int argc, char ** argv) {
    if (argc > 1 && std::string(argv[1]) == "batched") return batched_main(argc - 1, argv + 1);
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL THREADS [N_PROMPT] [N_GEN] [DEPTH] [REPS] [N_CTX] [N_SEQ] [POLL] [SAMPLE]\n", argv[0]);
        return 2;
    }
    const char * path = argv[1];
    const int threads = atoi(argv[2]);
    const int n_prompt = argc > 3 ? atoi(argv[3]) : 512;
    const int n_gen = argc > 4 ? atoi(argv[4]) : 128;
    const int depth = argc > 5 ? atoi(argv[5]) : 0;
    const int reps = argc > 6 ? atoi(argv[6]) : 5;
    const int n_ctx_arg = argc > 7 ? atoi(argv[7]) : 0;
    const int n_seq = argc > 8 ? atoi(argv[8]) : 1;
    const int poll = argc > 9 ? atoi(argv[9]) : -1;
    const bool sample = argc > 10 && atoi(argv[10]) != 0;

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(path, llama_model_default_params());
    if (!model) {
        fprintf(stderr, "cannot load %s\n", path);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx_arg > 0 ? n_ctx_arg : n_prompt + n_gen + depth;
    cp.n_seq_max = n_seq;
    cp.kv_unified = n_seq == 1;
    cp.n_batch = 2048;
    cp.n_ubatch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    llama_memory_t mem = llama_get_memory(ctx);
    ggml_threadpool * pool = nullptr;
    if (poll >= 0) {
        ggml_threadpool_params tp = ggml_threadpool_params_default(threads);
        tp.poll = (uint32_t) poll;
        pool = ggml_threadpool_new(&tp);
        llama_attach_threadpool(ctx, pool, pool);
    }
    llama_sampler * greedy = sample ? llama_sampler_init_greedy() : nullptr;

    // Warm-up, as llama-bench does.
    eval_prompt(ctx, std::min(n_prompt, 32), 512, n_vocab);
    llama_memory_clear(mem, true);
    generate(ctx, 1, n_vocab, greedy);

    double pp_sum = 0, tg_sum = 0;
    for (int r = 0; r < reps; r++) {
        llama_memory_clear(mem, true);
        double t0 = now_s();
        if (!eval_prompt(ctx, n_prompt, 512, n_vocab)) return 1;
        pp_sum += n_prompt / (now_s() - t0);

        llama_memory_clear(mem, true);
        if (depth > 0 && !eval_prompt(ctx, depth, 512, n_vocab)) return 1;
        t0 = now_s();
        if (!generate(ctx, n_gen, n_vocab, greedy)) return 1;
        tg_sum += n_gen / (now_s() - t0);
    }
    printf("llama.cpp reference, %d threads, n_ctx %u x %d seq, poll %d, sampling %s: pp%d %.1f tokens/s, tg%d @ d%d %.1f tokens/s (mean of %d)\n",
           threads, cp.n_ctx, n_seq, poll, sample ? "greedy" : "none", n_prompt, pp_sum / reps, n_gen, depth, tg_sum / reps, reps);

    if (greedy) llama_sampler_free(greedy);

    llama_free(ctx);
    if (pool) ggml_threadpool_free(pool);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
