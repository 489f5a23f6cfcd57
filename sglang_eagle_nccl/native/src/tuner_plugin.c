/* NCCL tuner plugin: the first rule matching a collective call (collective, byte range, communicator size,
 * node count, SGLang group label) picks its algorithm and protocol (and optionally nChannels).
 *
 * ABI, written from NVIDIA/nccl and checked against it:
 *   v2  2.21.5 src/include/nccl_tuner.h; 2.28+ src/include/plugin/tuner/tuner_v2.h  (out-parameters)
 *   v3  2.22.3 src/include/nccl_tuner.h; plugin/tuner/tuner_v3.h                    (cost table)
 *   v4  2.24.3 src/include/nccl_tuner.h; plugin/tuner/tuner_v4.h                    (+ regBuff)
 *   v5  2.28.3 src/include/plugin/tuner/tuner_v5.h            (init gets commId, NVL info, constants)
 *   v6  2.30.3 src/include/plugin/tuner/tuner_v6.h            (+ optional getChunkSize)
 * src/plugin/tuner.cc tries v6, v5, v4, v3, v2 in that order: each release uses the newest one it knows, so
 * only NCCL 2.21 ever calls our v2. init runs once per communicator in the thread that creates it.
 * Enum values, identical in every release 2.21-2.30 (src/include/nccl_common.h; 2.28+ plugin/nccl_tuner.h):
 * ncclFunc_t Broadcast=0 Reduce=1 AllGather=2 ReduceScatter=3 AllReduce=4; NCCL_ALGO_ Tree=0 Ring=1
 * CollNetDirect=2 CollNetChain=3 NVLS=4 NVLSTree=5 PAT=6 (2.23+); NCCL_PROTO_ LL=0 LL128=1 Simple=2.
 * Python sends these numbers; C only range-checks them. */
#include "sen_internal.h"

#define LOG_INFO 3         /* NCCL_LOG_INFO */
#define LOG_SUBSYS 0x41UL  /* NCCL_INIT | NCCL_TUNING */
#define NUM_COLLECTIVES 5  /* getCollInfo is only called for Broadcast..AllReduce */
#define NUM_ALGORITHMS 7   /* PAT = 6 is the highest id of any release */
#define NUM_PROTOCOLS 3
#define ALGO_COLLNET_DIRECT 2
#define ALGO_COLLNET_CHAIN 3
#define ALGO_NVLS 4
#define ALGO_NVLS_TREE 5
#define V2_NUM_ALGORITHMS 6 /* NCCL 2.21, the only user of v2, has no PAT */
#define CELL_IGNORE (-1.0f) /* NCCL_ALGO_PROTO_IGNORE: a combination NCCL will not run */

typedef struct {
  const char* name;
  sen_result_t (*init)(size_t nRanks, size_t nNodes, sen_logger_t log, void** ctx);
  sen_result_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  sen_result_t (*destroy)(void* ctx);
} sen_tuner_v2_t;

typedef struct {
  const char* name;
  sen_result_t (*init)(size_t nRanks, size_t nNodes, sen_logger_t log, void** ctx);
  sen_result_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  sen_result_t (*destroy)(void* ctx);
} sen_tuner_v3_t;

typedef struct {
  const char* name;
  sen_result_t (*init)(size_t nRanks, size_t nNodes, sen_logger_t log, void** ctx);
  sen_result_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  sen_result_t (*destroy)(void* ctx);
} sen_tuner_v4_t;

/* v5/v6 init also receives ncclNvlDomainInfo_v5_t* and ncclTunerConstants_v5_t*. We read neither, so they are
 * opaque pointers here (the pointee type does not change the calling convention). */
typedef sen_result_t (*init_v5_fn)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, sen_logger_t log,
                                   void* nvlDomainInfo, void* constants);
typedef sen_result_t (*coll_info_v4_fn)(void* ctx, int collType, size_t nBytes, int numPipeOps,
                                        float** collCostTable, int numAlgo, int numProto, int regBuff,
                                        int* nChannels);

typedef struct {
  const char* name;
  init_v5_fn init;
  coll_info_v4_fn getCollInfo;
  sen_result_t (*finalize)(void* ctx);
} sen_tuner_v5_t;

typedef struct {
  const char* name;
  init_v5_fn init;
  coll_info_v4_fn getCollInfo;
  sen_result_t (*finalize)(void* ctx);
  sen_result_t (*getChunkSize)(void* ctx, int collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} sen_tuner_v6_t;

typedef struct {
  int collective;
  uint64_t min_bytes, max_bytes; /* [min, max) of NCCL's nBytes */
  uint64_t min_ranks, max_ranks; /* inclusive */
  uint64_t min_nodes, max_nodes; /* inclusive */
  char* group;                   /* NULL: any communicator */
  int algorithm, protocol;
  int channels; /* 0: leave nChannels to NCCL */
} rule_t;

/* Not sen_env_lock: getCollInfo runs per collective and must not wait on getEnv traffic. */
static pthread_mutex_t tuner_lock = PTHREAD_MUTEX_INITIALIZER;
static rule_t* rules;
static size_t n_rules, cap_rules;

/* What this thread's last getCollInfo decided, so that `sglang-eagle-nccl tuner` can explain its answer. */
static _Thread_local int last_rule = -1;
static _Thread_local int last_applied = 0;

/* What the tuner actually answered, per communicator: one entry per (collective, size, answer), counted.
 * The answer is the rule that matched (-1: none), whether its cell was taken (applied), and the algorithm,
 * protocol and channels handed to NCCL (-1, -1, 0 when NCCL decides). */
typedef struct {
  int collective;
  uint64_t nbytes;
  int rule, applied, algorithm, protocol, channels;
  unsigned long long count;
} answer_t;

/* Per communicator, beyond this many distinct (collective, size, answer) entries a call is only counted in
 * `unrecorded`: a communicator that sees every size still costs bounded memory and a bounded line. */
#define MAX_ANSWERS 256

typedef struct tuner_ctx {
  int abi;
  size_t nranks, nnodes;
  char* group; /* label selected when NCCL called init, or NULL */
  uint64_t comm_id;
  int context;  /* 1, 2, ... in the order this process's communicators initialised the tuner (v2-v4 have no commId) */
  unsigned generation; /* the process that created it (see `generation`): a forked child does not report its parent's */
  pthread_mutex_t lock; /* the answers; taken alone by getCollInfo, after tuner_lock by the flush */
  answer_t* answers;
  size_t n_answers, cap_answers, last; /* last: the entry the previous call hit (a decode step repeats sizes) */
  unsigned long long unrecorded;
  struct tuner_ctx *prev, *next; /* live contexts, guarded by tuner_lock */
} tuner_ctx_t;

static tuner_ctx_t* live; /* contexts NCCL has not destroyed yet (tuner_lock) */
static int contexts;      /* contexts created in this process (tuner_lock) */
/* Bumped in a forked child: a context of another generation is the parent's (getpid() would be a system call
 * per collective). */
static unsigned generation;

void tuner_lock_for_fork(void) { pthread_mutex_lock(&tuner_lock); }
void tuner_unlock_after_fork(void) { pthread_mutex_unlock(&tuner_lock); }

/* In a forked child (tuner_lock held by the fork handler): the parent's communicators are not the child's. */
void tuner_forget_after_fork(void) {
  generation++;
  live = NULL;
  contexts = 0;
}

/* ---- control functions, called by Python through ctypes ---- */

SEN_EXPORT void sen_tuner_reset(void) {
  pthread_mutex_lock(&tuner_lock);
  for (size_t i = 0; i < n_rules; i++) free(rules[i].group);
  n_rules = 0;
  pthread_mutex_unlock(&tuner_lock);
}

/* Append a rule (first match wins, in the order added). Returns its index, or -EINVAL / -ENOMEM. */
SEN_EXPORT int sen_tuner_add_rule(int collective, uint64_t min_bytes, uint64_t max_bytes, uint64_t min_ranks,
                                  uint64_t max_ranks, uint64_t min_nodes, uint64_t max_nodes, const char* group,
                                  int algorithm, int protocol, int channels) {
  if (collective < 0 || collective >= NUM_COLLECTIVES || algorithm < 0 || algorithm >= NUM_ALGORITHMS ||
      protocol < 0 || protocol >= NUM_PROTOCOLS || channels < 0 || min_bytes >= max_bytes ||
      min_ranks > max_ranks || min_nodes > max_nodes || (group && !*group))
    return -EINVAL;
  rule_t r = {collective, min_bytes, max_bytes, min_ranks, max_ranks, min_nodes, max_nodes,
              sen_dup(group), algorithm, protocol, channels};
  if (group && !r.group) return -ENOMEM;
  int rc;
  pthread_mutex_lock(&tuner_lock);
  if (sen_grow((void**)&rules, &cap_rules, sizeof *rules, n_rules + 1)) {
    free(r.group);
    rc = -ENOMEM;
  } else {
    rules[n_rules] = r;
    rc = (int)n_rules++;
  }
  pthread_mutex_unlock(&tuner_lock);
  return rc;
}

SEN_EXPORT int sen_tuner_rule_count(void) {
  pthread_mutex_lock(&tuner_lock);
  int n = (int)n_rules;
  pthread_mutex_unlock(&tuner_lock);
  return n;
}

/* The rule index the calling thread's last getCollInfo matched (-1: none), and in *applied whether it changed
 * anything (0 when the rule's algorithm/protocol was unavailable, so NCCL decided). */
SEN_EXPORT int sen_tuner_last_decision(int* applied) {
  if (applied) *applied = last_applied;
  return last_rule;
}

/* ---- the plugin ---- */

/* First rule matching this call; copied to *out (without its group). Its index, or -1. */
static int match_rule(const tuner_ctx_t* ctx, int collective, size_t nbytes, rule_t* out) {
  int found = -1;
  pthread_mutex_lock(&tuner_lock);
  for (size_t i = 0; i < n_rules && found < 0; i++) {
    const rule_t* r = &rules[i];
    if (r->collective != collective || nbytes < r->min_bytes || nbytes >= r->max_bytes) continue;
    if (ctx->nranks < r->min_ranks || ctx->nranks > r->max_ranks) continue;
    if (ctx->nnodes < r->min_nodes || ctx->nnodes > r->max_nodes) continue;
    /* A group rule needs the label selected at init: torch's lazily created communicators have none. */
    if (r->group && !sen_same(r->group, ctx->group)) continue;
    *out = *r;
    out->group = NULL;
    found = (int)i;
  }
  pthread_mutex_unlock(&tuner_lock);
  return found;
}

static sen_result_t tuner_init(int abi, void** ctx_out, uint64_t comm_id, size_t nranks, size_t nnodes,
                               sen_logger_t log) {
  tuner_ctx_t* ctx = calloc(1, sizeof *ctx);
  /* Never fail communicator init for our sake: without a context, getCollInfo leaves NCCL's choice alone. */
  *ctx_out = ctx;
  if (!ctx) return SEN_NCCL_SUCCESS;
  ctx->abi = abi;
  ctx->nranks = nranks;
  ctx->nnodes = nnodes;
  ctx->comm_id = comm_id;
  ctx->generation = generation;
  pthread_mutex_init(&ctx->lock, NULL);
  int count = sen_tuner_rule_count();
  pthread_mutex_lock(&sen_env_lock);
  ctx->group = sen_dup(sen_selected_label);
  pthread_mutex_lock(&tuner_lock);
  ctx->context = ++contexts;
  ctx->next = live;
  if (live) live->prev = ctx;
  live = ctx;
  pthread_mutex_unlock(&tuner_lock);
  sbuf_t b = {0};
  sb_head(&b, "tuner_init");
  sb_fmt(&b, ",\"abi\":%d,\"nranks\":%zu,\"nnodes\":%zu,\"rules\":%d", abi, nranks, nnodes, count);
  /* commId (v5+: comm->commHash) tells communicators apart in the audit; v2-v4 do not receive it (0). */
  sb_fmt(&b, ",\"comm_id\":\"%016llx\",\"context\":%d", (unsigned long long)comm_id, ctx->context);
  sb_str(&b, ",\"group\":");
  sb_json(&b, ctx->group);
  reads_log_emit_locked(&b);
  pthread_mutex_unlock(&sen_env_lock);
  if (log)
    log(LOG_INFO, LOG_SUBSYS, __FILE__, __LINE__, "sglang-eagle-nccl tuner (v%d): %d rule(s), %zu rank(s), %zu node(s), group %s",
        abi, count, nranks, nnodes, ctx->group ? ctx->group : "(none)");
  return SEN_NCCL_SUCCESS;
}

/* Count one answer of `ctx` (getCollInfo's thread; NCCL does not call one communicator from two threads at
 * once, the lock is for a concurrent flush). A repeated size costs one comparison and an increment. */
static void note_answer(tuner_ctx_t* ctx, int collective, size_t nbytes, int rule, int applied, int algorithm,
                        int protocol, int channels) {
  if (!ctx || ctx->generation != generation) return;
  answer_t key = {collective, (uint64_t)nbytes, rule, applied, algorithm, protocol, channels, 0};
  pthread_mutex_lock(&ctx->lock);
  answer_t* hit = NULL;
  if (ctx->last < ctx->n_answers) {
    answer_t* a = &ctx->answers[ctx->last];
    if (a->collective == collective && a->nbytes == key.nbytes && a->rule == rule && a->applied == applied &&
        a->algorithm == algorithm && a->protocol == protocol && a->channels == channels)
      hit = a;
  }
  for (size_t i = 0; !hit && i < ctx->n_answers; i++) {
    answer_t* a = &ctx->answers[i];
    if (a->collective == collective && a->nbytes == key.nbytes && a->rule == rule && a->applied == applied &&
        a->algorithm == algorithm && a->protocol == protocol && a->channels == channels) {
      hit = a;
      ctx->last = i;
    }
  }
  if (!hit && ctx->n_answers < MAX_ANSWERS &&
      !sen_grow((void**)&ctx->answers, &ctx->cap_answers, sizeof *ctx->answers, ctx->n_answers + 1)) {
    ctx->last = ctx->n_answers;
    hit = &ctx->answers[ctx->n_answers++];
    *hit = key;
  }
  if (hit) hit->count++;
  else ctx->unrecorded++;
  pthread_mutex_unlock(&ctx->lock);
}

/* One "tuner_answers" line: the cumulative answers of one communicator (sen_env_lock held; the reader keeps the
 * largest count of each entry, so a flush followed by the final line counts nothing twice). */
static void emit_answers_locked(tuner_ctx_t* ctx, int final) {
  pthread_mutex_lock(&ctx->lock);
  sbuf_t b = {0};
  sb_head(&b, "tuner_answers");
  sb_fmt(&b, ",\"abi\":%d,\"nranks\":%zu,\"nnodes\":%zu", ctx->abi, ctx->nranks, ctx->nnodes);
  sb_fmt(&b, ",\"comm_id\":\"%016llx\",\"context\":%d", (unsigned long long)ctx->comm_id, ctx->context);
  sb_str(&b, ",\"group\":");
  sb_json(&b, ctx->group);
  sb_str(&b, final ? ",\"final\":true,\"answers\":[" : ",\"final\":false,\"answers\":[");
  for (size_t i = 0; i < ctx->n_answers; i++) {
    const answer_t* a = &ctx->answers[i];
    /* sb_fmt formats at most 95 characters at a time: one field group per call */
    sb_fmt(&b, "%s{\"collective\":%d,\"bytes\":%llu,\"rule\":%d", i ? "," : "", a->collective,
           (unsigned long long)a->nbytes, a->rule);
    sb_fmt(&b, ",\"applied\":%s,\"algorithm\":%d,\"protocol\":%d", a->applied ? "true" : "false", a->algorithm,
           a->protocol);
    sb_fmt(&b, ",\"channels\":%d,\"count\":%llu}", a->channels, a->count);
  }
  sb_fmt(&b, "],\"unrecorded\":%llu", ctx->unrecorded);
  pthread_mutex_unlock(&ctx->lock);
  reads_log_emit_locked(&b);
}

/* The answers of every live communicator, cumulative (with the "counts" line: at exit, on demand). */
void tuner_answers_flush_locked(void) {
  pthread_mutex_lock(&tuner_lock);
  for (tuner_ctx_t* c = live; c; c = c->next)
    if (c->generation == generation && (c->n_answers || c->unrecorded)) emit_answers_locked(c, 0);
  pthread_mutex_unlock(&tuner_lock);
}

/* destroy (v2-v4) / finalize (v5+): the communicator's final answers go to the reads log, then it is freed. */
static sen_result_t tuner_free(void* ctx) {
  tuner_ctx_t* c = ctx;
  if (!c) return SEN_NCCL_SUCCESS;
  if (c->generation == generation) {
    pthread_mutex_lock(&sen_env_lock);
    pthread_mutex_lock(&tuner_lock);
    if (c->prev) c->prev->next = c->next;
    else if (live == c) live = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&tuner_lock);
    emit_answers_locked(c, 1);
    pthread_mutex_unlock(&sen_env_lock);
    pthread_mutex_destroy(&c->lock);
  }
  free(c->answers);
  free(c->group);
  free(c);
  return SEN_NCCL_SUCCESS;
}

/* v3+: select the rule's cell by giving it cost 0.0, but only if NCCL allows it: a -1 cell is a combination
 * NCCL will not run (unsupported, or disabled by NCCL_PROTO/NCCL_ALGO) and re-enabling it is unsafe. Every
 * other cell is left as is; no matching rule leaves the table untouched. The table is NCCL's
 * float[numAlgo][numProto] cast to float** (src/enqueue.cc), so it is read as one flat float array. */
static sen_result_t decide_table(void* ctx, int collective, size_t nbytes, float** table, int num_algo,
                                 int num_proto, int* nchannels) {
  last_rule = -1;
  last_applied = 0;
  rule_t r;
  if (!ctx || !table) return SEN_NCCL_SUCCESS;
  int index = match_rule(ctx, collective, nbytes, &r);
  last_rule = index;
  if (index < 0 || r.algorithm >= num_algo || r.protocol >= num_proto) {
    note_answer(ctx, collective, nbytes, index, 0, -1, -1, 0);
    return SEN_NCCL_SUCCESS;
  }
  float* cell = (float*)table + (size_t)r.algorithm * (size_t)num_proto + (size_t)r.protocol;
  if (*cell == CELL_IGNORE) {
    note_answer(ctx, collective, nbytes, index, 0, -1, -1, 0);
    return SEN_NCCL_SUCCESS;
  }
  *cell = 0.0f;
  int channels = r.channels > 0 && nchannels ? r.channels : 0;
  if (channels) *nchannels = channels;
  last_applied = 1;
  note_answer(ctx, collective, nbytes, index, 1, r.algorithm, r.protocol, channels);
  return SEN_NCCL_SUCCESS;
}

/* v2 has no cost table: the choice goes back through the out-parameters, which NCCL 2.21 takes without
 * checking support. So CollNet/NVLS choices are returned only when NCCL says it supports them, PAT never. */
static sen_result_t coll_info_v2(void* ctx, int collective, size_t nbytes, int collnet_support, int nvls_support,
                                 int num_pipe_ops, int* algorithm, int* protocol, int* nchannels) {
  (void)num_pipe_ops;
  last_rule = -1;
  last_applied = 0;
  rule_t r;
  if (!ctx || !algorithm || !protocol) return SEN_NCCL_SUCCESS;
  int index = match_rule(ctx, collective, nbytes, &r);
  last_rule = index;
  if (index < 0 || r.algorithm >= V2_NUM_ALGORITHMS ||
      ((r.algorithm == ALGO_COLLNET_DIRECT || r.algorithm == ALGO_COLLNET_CHAIN) && collnet_support != 1) ||
      ((r.algorithm == ALGO_NVLS || r.algorithm == ALGO_NVLS_TREE) && nvls_support != 1)) {
    note_answer(ctx, collective, nbytes, index, 0, -1, -1, 0);
    return SEN_NCCL_SUCCESS;
  }
  *algorithm = r.algorithm;
  *protocol = r.protocol;
  int channels = r.channels > 0 && nchannels ? r.channels : 0;
  if (channels) *nchannels = channels;
  last_applied = 1;
  note_answer(ctx, collective, nbytes, index, 1, r.algorithm, r.protocol, channels);
  return SEN_NCCL_SUCCESS;
}

static sen_result_t init_v2(size_t nranks, size_t nnodes, sen_logger_t log, void** ctx) {
  return tuner_init(2, ctx, 0, nranks, nnodes, log);
}
static sen_result_t init_v3(size_t nranks, size_t nnodes, sen_logger_t log, void** ctx) {
  return tuner_init(3, ctx, 0, nranks, nnodes, log);
}
static sen_result_t init_v4(size_t nranks, size_t nnodes, sen_logger_t log, void** ctx) {
  return tuner_init(4, ctx, 0, nranks, nnodes, log);
}
/* NCCL's tuning-model constants and NVL domain info are left untouched. */
static sen_result_t init_v5(void** ctx, uint64_t comm_id, size_t nranks, size_t nnodes, sen_logger_t log,
                            void* nvl_domain_info, void* constants) {
  (void)nvl_domain_info, (void)constants;
  return tuner_init(5, ctx, comm_id, nranks, nnodes, log);
}
static sen_result_t init_v6(void** ctx, uint64_t comm_id, size_t nranks, size_t nnodes, sen_logger_t log,
                            void* nvl_domain_info, void* constants) {
  (void)nvl_domain_info, (void)constants;
  return tuner_init(6, ctx, comm_id, nranks, nnodes, log);
}

static sen_result_t coll_info_v3(void* ctx, int collective, size_t nbytes, int num_pipe_ops, float** table,
                                 int num_algo, int num_proto, int* nchannels) {
  (void)num_pipe_ops;
  return decide_table(ctx, collective, nbytes, table, num_algo, num_proto, nchannels);
}

static sen_result_t coll_info_v4(void* ctx, int collective, size_t nbytes, int num_pipe_ops, float** table,
                                 int num_algo, int num_proto, int reg_buff, int* nchannels) {
  (void)num_pipe_ops, (void)reg_buff;
  return decide_table(ctx, collective, nbytes, table, num_algo, num_proto, nchannels);
}

SEN_EXPORT sen_tuner_v2_t ncclTunerPlugin_v2 = {"sglang-eagle-nccl", init_v2, coll_info_v2, tuner_free};
SEN_EXPORT sen_tuner_v3_t ncclTunerPlugin_v3 = {"sglang-eagle-nccl", init_v3, coll_info_v3, tuner_free};
SEN_EXPORT sen_tuner_v4_t ncclTunerPlugin_v4 = {"sglang-eagle-nccl", init_v4, coll_info_v4, tuner_free};
SEN_EXPORT sen_tuner_v5_t ncclTunerPlugin_v5 = {"sglang-eagle-nccl", init_v5, coll_info_v4, tuner_free};
/* getChunkSize is optional: NULL keeps NCCL's chunk size (src/enqueue.cc checks for NULL). */
SEN_EXPORT sen_tuner_v6_t ncclTunerPlugin_v6 = {"sglang-eagle-nccl", init_v6, coll_info_v4, tuner_free, NULL};
