/* The reads log: one JSON line per first sighting of what NCCL read, in a per-process file Python names.
 *
 * Lines ("event" field): "env_init" (NCCL loaded the env plugin: ABI, NCCL version), "read" (first lookup of a
 * (name, value, source, environment) combination), "tuner_init" (a communicator initialised the tuner),
 * "tuner_answers" (what the tuner answered one communicator, counted per collective, size and answer: at its
 * destroy, and cumulative for the live ones whenever "counts" is written; tuner_plugin.c), and
 * "counts" (cumulative counts of every recorded read; written when Python asks and at NCCL's finalize, so the
 * last one is the most complete). Nothing here can fail NCCL: an error is kept for Python to report. */
#include "sen_internal.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

/* The environment's value is part of the key, so a foreign write after NCCL's first read is recorded too. */
typedef struct {
  char* name;
  char* value;
  char* source;
  char* environment;
  unsigned long long count;
} seen_t;

static seen_t* seen;
static size_t n_seen, cap_seen;
#define MAX_SEEN 4096 /* beyond this, reads are only counted in `unrecorded`: memory stays bounded */
static unsigned long long unrecorded;

static int log_fd = -1;
static int log_error = -1; /* -1: no log opened yet; 0: fine; >0: errno of the first failure */
static sbuf_t pending;     /* lines produced before the log was opened (NCCL may read before Python opens it) */
#define MAX_PENDING (1u << 20)

/* One write(2) per line on an O_APPEND file keeps the lines of concurrent writers apart. Linux copies a write
 * into a regular file a page (or a folio: a multiple of it) at a time and stops between two when the process is
 * being killed, so a line that would cross a page boundary and fits in a page starts on the next page, after a
 * blank line of spaces (readers skip blank lines), in the same writev(2): a kill lands before the line or after
 * it, never inside (a line longer than a page can still be cut; the audit lists it as a cut line). A line the
 * disk has no room for is whole or absent: what a short write got out is truncated away (this process alone
 * appends to its log, under sen_env_lock), and the errno is kept (ENOSPC / EDQUOT: Python leaves the disk-full
 * marker the audit reports). */
#define PAGE 4096
static off_t log_size; /* bytes in the log: its only writer is this process */
static char spaces[PAGE]; /* PAGE - 1 spaces and a newline: the tail of it is the padding */

static void write_line_locked(const char* p, size_t n) {
  if (spaces[PAGE - 1] != '\n') memset(spaces, ' ', PAGE - 1), spaces[PAGE - 1] = '\n';
  size_t room = PAGE - (size_t)(log_size % PAGE);
  size_t pad = (room < n && n <= PAGE) ? room : 0;
  struct iovec iov[2] = {{(void*)(spaces + PAGE - pad), pad}, {(void*)p, n}};
  size_t total = pad + n, done = 0;
  while (done < total) {
    struct iovec* v = iov;
    int count = 2;
    size_t skip = done;
    while (count > 0 && skip >= v->iov_len) skip -= v->iov_len, v++, count--;
    struct iovec rest[2] = {{(char*)v[0].iov_base + skip, v[0].iov_len - skip}, {0}};
    if (count == 2) rest[1] = v[1];
    ssize_t w = writev(log_fd, rest, count);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : ENOSPC;
      if (done > 0) {
        off_t end = lseek(log_fd, 0, SEEK_END);
        if (end >= (off_t)done) {
          int rc = ftruncate(log_fd, end - (off_t)done); /* on failure: left as a cut line, which the audit lists */
          (void)rc;
        }
      }
      if (log_error <= 0) log_error = err;
      return;
    }
    done += (size_t)w;
    log_size += w;
  }
}

static void write_locked(const char* p, size_t n) {
  if (log_fd < 0) {
    if (pending.len + n <= MAX_PENDING) sb_add(&pending, p, n);
    return;
  }
  while (n > 0) { /* line by line: the queued lines were buffered together */
    const char* nl = memchr(p, '\n', n);
    size_t len = nl ? (size_t)(nl - p) + 1 : n;
    write_line_locked(p, len);
    p += len;
    n -= len;
  }
}

void reads_log_emit_locked(sbuf_t* line) {
  sb_str(line, "}\n");
  if (!line->oom) write_locked(line->p, line->len);
  else if (log_error <= 0) log_error = ENOMEM;
  free(line->p);
  *line = (sbuf_t){0};
}

void reads_log_record_locked(const char* name, const char* value, const char* source, const char* environment,
                             int disagrees) {
  for (size_t i = 0; i < n_seen; i++) {
    seen_t* s = &seen[i];
    if (strcmp(s->name, name) == 0 && sen_same(s->value, value) && strcmp(s->source, source) == 0 &&
        sen_same(s->environment, environment)) {
      s->count++;
      return;
    }
  }
  if (n_seen >= MAX_SEEN || sen_grow((void**)&seen, &cap_seen, sizeof *seen, n_seen + 1)) {
    unrecorded++;
    return;
  }
  seen_t s = {strdup(name), sen_dup(value), strdup(source), sen_dup(environment), 1};
  if (!s.name || !s.source || (value && !s.value) || (environment && !s.environment)) {
    free(s.name), free(s.value), free(s.source), free(s.environment);
    unrecorded++;
    return;
  }
  seen[n_seen++] = s;
  sbuf_t b = {0};
  sb_head(&b, "read");
  sb_str(&b, ",\"name\":");
  sb_json(&b, name);
  sb_str(&b, ",\"value\":");
  sb_json(&b, value);
  sb_str(&b, ",\"source\":");
  sb_json(&b, source);
  sb_str(&b, ",\"environment\":");
  sb_json(&b, environment);
  sb_str(&b, disagrees ? ",\"disagrees\":true" : ",\"disagrees\":false");
  reads_log_emit_locked(&b);
}

void reads_log_counts_locked(void) {
  sbuf_t b = {0};
  sb_head(&b, "counts");
  sb_str(&b, ",\"reads\":[");
  for (size_t i = 0; i < n_seen; i++) {
    sb_str(&b, i ? ",{\"name\":" : "{\"name\":");
    sb_json(&b, seen[i].name);
    sb_str(&b, ",\"value\":");
    sb_json(&b, seen[i].value);
    sb_str(&b, ",\"source\":");
    sb_json(&b, seen[i].source);
    sb_str(&b, ",\"environment\":");
    sb_json(&b, seen[i].environment);
    sb_fmt(&b, ",\"count\":%llu}", seen[i].count);
  }
  sb_fmt(&b, "],\"unrecorded\":%llu", unrecorded);
  reads_log_emit_locked(&b);
}

void reads_log_reset_locked(void) {
  if (log_fd >= 0) close(log_fd);
  log_fd = -1;
  log_error = -1;
  free(pending.p);
  pending = (sbuf_t){0};
  for (size_t i = 0; i < n_seen; i++)
    free(seen[i].name), free(seen[i].value), free(seen[i].source), free(seen[i].environment);
  n_seen = 0;
  unrecorded = 0;
}

/* Use `fd` as this process's reads log (the library takes it over and closes it on reset). Python creates the
 * file under the launch directory's rules (contract/launch_dir.py: created new with O_EXCL | O_NOFOLLOW, in a
 * private directory of this user) and writes the identity line first; the library never opens a path itself, so
 * a planted FIFO, symlink or hard link can never be written through. Lines produced before (e.g. at NCCL's init)
 * are written now. 0 or an errno. */
SEN_EXPORT int sen_set_reads_log_fd(int fd) {
  if (fd < 0) return EBADF;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return errno;
  if ((flags & O_ACCMODE) == O_RDONLY || !(flags & O_APPEND)) return EINVAL; /* one write(2) per line needs O_APPEND */
  pthread_mutex_lock(&sen_env_lock);
  if (log_fd >= 0 && log_fd != fd) close(log_fd);
  log_fd = fd;
  log_error = 0;
  log_size = lseek(fd, 0, SEEK_END); /* after the identity line Python wrote */
  if (log_size < 0) log_size = 0;
  sbuf_t queued = pending;
  pending = (sbuf_t){0};
  if (queued.len) write_locked(queued.p, queued.len);
  free(queued.p);
  pthread_mutex_unlock(&sen_env_lock);
  return 0;
}

/* 0: the log is open and every write succeeded; -1: no log opened yet; otherwise the first errno. */
SEN_EXPORT int sen_reads_log_status(void) {
  pthread_mutex_lock(&sen_env_lock);
  int rc = log_error;
  pthread_mutex_unlock(&sen_env_lock);
  return rc;
}

/* Append one "counts" line, and a "tuner_answers" line per communicator NCCL has not destroyed yet (a process
 * may exit without destroying them). Returns sen_reads_log_status(). */
SEN_EXPORT int sen_flush_reads_counts(void) {
  pthread_mutex_lock(&sen_env_lock);
  reads_log_counts_locked();
  tuner_answers_flush_locked();
  int rc = log_error;
  pthread_mutex_unlock(&sen_env_lock);
  return rc;
}

/* Close the log and forget every recorded read, as in a new process (a forked child starts so). */
SEN_EXPORT void sen_reads_reset(void) {
  pthread_mutex_lock(&sen_env_lock);
  reads_log_reset_locked();
  pthread_mutex_unlock(&sen_env_lock);
}
