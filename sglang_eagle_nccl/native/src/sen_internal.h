/*
 * sglang-eagle-nccl native NCCL plugins: declarations shared by the C files of this directory.
 *
 * Python validates, C obeys: the Python side (../library.py) loads this library with ctypes before the first
 * NCCL call and hands it flat, already validated values and rules through the exported sen_* functions. NCCL
 * then dlopens the same path (NCCL_ENV_PLUGIN / NCCL_TUNER_PLUGIN) and gets the same instance, hence the same
 * state. Nothing here parses a wire format or reads a file. libc + pthread only.
 *
 *   env_plugin.c    ncclEnvPlugin_v1/_v2: serve the profile, record what NCCL reads
 *   reads_log.c     the per-process JSON-lines file of those reads
 *   tuner_plugin.c  ncclTunerPlugin_v2.._v6: first matching size/rank/group rule picks algorithm/protocol;
 *                   counts what it answered per communicator, written to the reads log at destroy and flush
 *   json_line.c     building one JSON line (escaping arbitrary environment bytes)
 *
 * Build: cc -std=c11 -Wall -Wextra -O2 -fPIC -fvisibility=hidden -shared -pthread (see ../build.py). Only what
 * SEN_EXPORT marks is visible to the dynamic loader.
 */
#ifndef SEN_INTERNAL_H
#define SEN_INTERNAL_H

#define _GNU_SOURCE /* O_NOFOLLOW, O_CLOEXEC, strdup, clock_gettime under -std=c11 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEN_EXPORT __attribute__((visibility("default")))

#ifndef SEN_LIBRARY_VERSION
#define SEN_LIBRARY_VERSION "unversioned"
#endif

/* ncclResult_t is an int-sized enum; ncclSuccess = 0 (src/nccl.h.in). */
typedef int sen_result_t;
#define SEN_NCCL_SUCCESS 0

/* ncclDebugLogger_t (src/include/nccl_common.h): level is the ncclDebugLogLevel enum, flags the subsystems. */
typedef void (*sen_logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

/* ---- small helpers ---- */

/* Grow a malloc'ed array so that it holds at least `need` elements. Returns 0 or ENOMEM. */
static inline int sen_grow(void** array, size_t* cap, size_t elem, size_t need) {
  if (need <= *cap) return 0;
  size_t next = *cap ? *cap * 2 : 16;
  while (next < need) next *= 2;
  void* p = realloc(*array, next * elem);
  if (!p) return ENOMEM;
  *array = p;
  *cap = next;
  return 0;
}

/* strcmp that treats NULL as a value of its own. */
static inline int sen_same(const char* a, const char* b) {
  if (a == NULL || b == NULL) return a == b;
  return strcmp(a, b) == 0;
}

static inline char* sen_dup(const char* s) { return s ? strdup(s) : NULL; }

/* ---- json_line.c: one JSON object per line ---- */

typedef struct {
  char* p;
  size_t len, cap;
  int oom; /* an allocation failed: the line is dropped, not written half */
} sbuf_t;

void sb_add(sbuf_t* b, const char* s, size_t n);
void sb_str(sbuf_t* b, const char* s);
__attribute__((format(printf, 2, 3))) void sb_fmt(sbuf_t* b, const char* fmt, ...);
void sb_json(sbuf_t* b, const char* s); /* a JSON string, or null for NULL */
void sb_head(sbuf_t* b, const char* event); /* {"event":..,"pid":..,"time":.. */

/* ---- env_plugin.c: state shared with the tuner (guarded by sen_env_lock) ---- */

/* One lock for the env plugin and the reads log: NCCL calls getEnv from several threads (non-blocking
 * communicator init runs in its own thread) while Python selects group labels. Order: sen_env_lock before
 * the tuner's lock, never the reverse. */
extern pthread_mutex_t sen_env_lock;
extern char* sen_selected_label; /* group whose communicator is being created, or NULL */

/* ---- reads_log.c (call with sen_env_lock held) ---- */

void reads_log_emit_locked(sbuf_t* line); /* closes the object, writes or queues it, frees the buffer */
void reads_log_record_locked(const char* name, const char* value, const char* source, const char* environment,
                             int disagrees);
void reads_log_counts_locked(void);
void reads_log_reset_locked(void);

/* ---- tuner_plugin.c ---- */

void tuner_lock_for_fork(void);
void tuner_unlock_after_fork(void);
void tuner_forget_after_fork(void);    /* with tuner_lock held, in a forked child */
void tuner_answers_flush_locked(void); /* sen_env_lock held: a "tuner_answers" line per live communicator */

#endif
