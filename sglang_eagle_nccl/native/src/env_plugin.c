/* NCCL env plugin: every NCCL parameter lookup asks getEnv (NCCL >= 2.28.7); it serves the profile's value
 * whatever the process environment says now, and records what NCCL got.
 *
 * ABI, written from NVIDIA/nccl and checked against it:
 *   ncclEnvPlugin_v1  src/include/plugin/env/env_v1.h (2.28.7+)
 *   ncclEnvPlugin_v2  src/include/plugin/env/env_v2.h (2.30.7+): init also receives NCCL's logger
 * src/plugin/env.cc dlopens NCCL_ENV_PLUGIN (read with getenv), looks up _v2, then _v1, calls init once,
 * then routes every ncclGetEnv through getEnv, and calls finalize from an atexit handler. getEnv's result
 * must stay valid until the next getEnv of the same name or finalize.
 * -DSEN_NO_ENV_V2 leaves _v2 out, so that the v1 path can be tested against an NCCL that prefers v2. */
#include "sen_internal.h"

#include <stdio.h>

#define SEN_CONTROL_ABI 2 /* version of the sen_* functions (contract/native_abi.py); 2: the reads log is a descriptor */

typedef struct {
  const char* name;
  sen_result_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix);
  sen_result_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} sen_env_v1_t;

typedef struct {
  const char* name;
  sen_result_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, sen_logger_t log);
  sen_result_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} sen_env_v2_t;

pthread_mutex_t sen_env_lock = PTHREAD_MUTEX_INITIALIZER;
char* sen_selected_label;

typedef struct {
  char* group; /* NULL: process-wide value */
  char* name;
  char* value;
} value_t;
static value_t* values;
static size_t n_values, cap_values;

static char** env_wins; /* names served from the real environment (policy sglang_wins) */
static size_t n_wins, cap_wins;

/* Storage for the pointers getEnv returns: copies, never pointers into environ (a later setenv may free that).
 * NCCL may use a returned pointer until its next getEnv of the same name, but with several NCCL threads (and
 * group labels switching) "the next getEnv" can come from another thread first. So every distinct value of a
 * name is kept and returned again for the same content: alternating values reuse the same copies and nothing
 * a thread may still read is freed. Only a name whose environment keeps taking new values evicts its oldest
 * copy, after MAX_COPIES distinct ones. */
#define MAX_COPIES 64
typedef struct {
  char* name;
  char* copies[MAX_COPIES];
  size_t n_copies;
  size_t oldest; /* next to evict once all MAX_COPIES are taken */
} served_t;
static served_t* served;
static size_t n_served, cap_served;

static const char* loaded_abi = "none";
static char nccl_version[48];

static const char* lookup_locked(const char* group, const char* name) {
  for (size_t i = 0; i < n_values; i++)
    if (sen_same(values[i].group, group) && strcmp(values[i].name, name) == 0) return values[i].value;
  return NULL;
}

static int is_env_wins_locked(const char* name) {
  for (size_t i = 0; i < n_wins; i++)
    if (strcmp(env_wins[i], name) == 0) return 1;
  return 0;
}

/* The stored copy of `value` for `name` (NULL stays NULL; NULL also when out of memory). */
static const char* serve_locked(const char* name, const char* value) {
  if (value == NULL) return NULL;
  served_t* slot = NULL;
  for (size_t i = 0; i < n_served && !slot; i++)
    if (strcmp(served[i].name, name) == 0) slot = &served[i];
  if (slot == NULL) {
    char* copy = strdup(name);
    if (!copy || sen_grow((void**)&served, &cap_served, sizeof *served, n_served + 1)) {
      free(copy);
      return NULL;
    }
    slot = &served[n_served++];
    memset(slot, 0, sizeof *slot);
    slot->name = copy;
  }
  for (size_t i = 0; i < slot->n_copies; i++)
    if (strcmp(slot->copies[i], value) == 0) return slot->copies[i];
  char* copy = strdup(value);
  if (!copy) return NULL;
  if (slot->n_copies < MAX_COPIES) {
    slot->copies[slot->n_copies++] = copy;
  } else {
    free(slot->copies[slot->oldest]);
    slot->copies[slot->oldest] = copy;
    slot->oldest = (slot->oldest + 1) % MAX_COPIES;
  }
  return copy;
}

static const char* get_env(const char* name) {
  if (name == NULL) return NULL;
  pthread_mutex_lock(&sen_env_lock);
  /* Copy the real environment's value at once: another thread's setenv may free what getenv returned. */
  const char* raw = getenv(name);
  char* environment = raw ? strdup(raw) : NULL;
  const char* group_value = sen_selected_label ? lookup_locked(sen_selected_label, name) : NULL;
  const char* profile_value = group_value ? group_value : lookup_locked(NULL, name);
  const char* value = environment;
  char source[96] = "environment";
  int disagrees = 0;
  if (is_env_wins_locked(name)) {
    /* The profile lets SGLang (or the user) win for this name: serve what the environment says now. */
    snprintf(source, sizeof source, "environment (sglang_wins)");
    disagrees = profile_value != NULL && !sen_same(profile_value, environment);
  } else if (profile_value) {
    value = profile_value;
    if (group_value) snprintf(source, sizeof source, "group:%s", sen_selected_label);
    else snprintf(source, sizeof source, "profile");
    disagrees = !sen_same(profile_value, environment);
  }
  const char* result = serve_locked(name, value);
  reads_log_record_locked(name, value, source, environment, disagrees);
  pthread_mutex_unlock(&sen_env_lock);
  free(environment);
  return result;
}

static void record_init(const char* abi, uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  pthread_mutex_lock(&sen_env_lock);
  loaded_abi = abi;
  snprintf(nccl_version, sizeof nccl_version, "%u.%u.%u%s", major, minor, patch, suffix ? suffix : "");
  sbuf_t b = {0};
  sb_head(&b, "env_init");
  sb_str(&b, ",\"abi\":");
  sb_json(&b, abi);
  sb_str(&b, ",\"nccl_version\":");
  sb_json(&b, nccl_version);
  sb_str(&b, ",\"library_version\":");
  sb_json(&b, SEN_LIBRARY_VERSION);
  reads_log_emit_locked(&b);
  pthread_mutex_unlock(&sen_env_lock);
}

static sen_result_t init_v1(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  record_init("v1", major, minor, patch, suffix);
  return SEN_NCCL_SUCCESS;
}

#ifndef SEN_NO_ENV_V2
static sen_result_t init_v2(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, sen_logger_t log) {
  (void)log; /* NCCL itself logs "Successfully loaded external env plugin"; per-read logging would flood */
  record_init("v2", major, minor, patch, suffix);
  return SEN_NCCL_SUCCESS;
}
#endif

/* Called from NCCL's atexit handler. The served copies are deliberately not freed: another NCCL thread may
 * still hold one while the process exits, and the memory goes away with the process. */
static sen_result_t finalize(void) {
  pthread_mutex_lock(&sen_env_lock);
  reads_log_counts_locked();
  tuner_answers_flush_locked();
  pthread_mutex_unlock(&sen_env_lock);
  return SEN_NCCL_SUCCESS;
}

SEN_EXPORT sen_env_v1_t ncclEnvPlugin_v1 = {"sglang-eagle-nccl", init_v1, finalize, get_env};
#ifndef SEN_NO_ENV_V2
SEN_EXPORT sen_env_v2_t ncclEnvPlugin_v2 = {"sglang-eagle-nccl", init_v2, finalize, get_env};
#endif

/* ---- control functions, called by Python through ctypes ---- */

SEN_EXPORT int sen_abi_version(void) { return SEN_CONTROL_ABI; }

/* Package version + source digest (compiled in): ranks compare this, never the path. */
SEN_EXPORT const char* sen_library_version(void) { return SEN_LIBRARY_VERSION; }

/* Forget every profile value and environment-wins name (the selected group label is kept). */
SEN_EXPORT void sen_env_reset(void) {
  pthread_mutex_lock(&sen_env_lock);
  for (size_t i = 0; i < n_values; i++) free(values[i].group), free(values[i].name), free(values[i].value);
  n_values = 0;
  for (size_t i = 0; i < n_wins; i++) free(env_wins[i]);
  n_wins = 0;
  pthread_mutex_unlock(&sen_env_lock);
}

static int set_value(const char* group, const char* name, const char* value) {
  if (!name || !value || (group && !*group)) return EINVAL;
  value_t v = {sen_dup(group), strdup(name), strdup(value)};
  if ((group && !v.group) || !v.name || !v.value) {
    free(v.group), free(v.name), free(v.value);
    return ENOMEM;
  }
  int rc = 0;
  pthread_mutex_lock(&sen_env_lock);
  size_t i = 0;
  while (i < n_values && !(sen_same(values[i].group, group) && strcmp(values[i].name, name) == 0)) i++;
  if (i < n_values) {
    free(values[i].group), free(values[i].name), free(values[i].value);
    values[i] = v;
  } else if (sen_grow((void**)&values, &cap_values, sizeof *values, n_values + 1)) {
    free(v.group), free(v.name), free(v.value);
    rc = ENOMEM;
  } else {
    values[n_values++] = v;
  }
  pthread_mutex_unlock(&sen_env_lock);
  return rc;
}

/* A process-wide profile value: served whatever the environment says later. 0 or an errno. */
SEN_EXPORT int sen_env_set(const char* name, const char* value) { return set_value(NULL, name, value); }

/* A value of one SGLang group, served only while that group's label is selected. 0 or an errno. */
SEN_EXPORT int sen_env_set_group(const char* group, const char* name, const char* value) {
  return group ? set_value(group, name, value) : EINVAL;
}

/* Serve `name` from the real environment even when the profile has a value (policy sglang_wins). */
SEN_EXPORT int sen_env_environment_wins(const char* name) {
  if (!name) return EINVAL;
  char* copy = strdup(name);
  if (!copy) return ENOMEM;
  int rc = 0;
  pthread_mutex_lock(&sen_env_lock);
  if (is_env_wins_locked(name)) {
    free(copy);
  } else if (sen_grow((void**)&env_wins, &cap_wins, sizeof *env_wins, n_wins + 1)) {
    free(copy);
    rc = ENOMEM;
  } else {
    env_wins[n_wins++] = copy;
  }
  pthread_mutex_unlock(&sen_env_lock);
  return rc;
}

/* Select the label of the group whose communicator is about to be created (NULL clears). The tuner reads it
 * in init; the env plugin serves that group's values while it is selected. 0 or an errno. */
SEN_EXPORT int sen_select_group(const char* label) {
  char* copy = NULL;
  if (label && !(copy = strdup(label))) return ENOMEM;
  pthread_mutex_lock(&sen_env_lock);
  free(sen_selected_label);
  sen_selected_label = copy;
  pthread_mutex_unlock(&sen_env_lock);
  return 0;
}

/* Copy the selected label into buf (NUL-terminated, cut to size). Its length, or -1 when none is selected. */
SEN_EXPORT int sen_selected_group(char* buf, size_t size) {
  int n = -1;
  pthread_mutex_lock(&sen_env_lock);
  if (sen_selected_label) {
    n = (int)strlen(sen_selected_label);
    if (buf && size) snprintf(buf, size, "%s", sen_selected_label);
  }
  pthread_mutex_unlock(&sen_env_lock);
  return n;
}

/* "v1"/"v2" once NCCL called init, else "none" (a string literal: valid forever). */
SEN_EXPORT const char* sen_env_plugin_abi(void) {
  pthread_mutex_lock(&sen_env_lock);
  const char* abi = loaded_abi;
  pthread_mutex_unlock(&sen_env_lock);
  return abi;
}

/* The NCCL version NCCL announced to init ("" before); returns its length. */
SEN_EXPORT int sen_nccl_version(char* buf, size_t size) {
  pthread_mutex_lock(&sen_env_lock);
  int n = (int)strlen(nccl_version);
  if (buf && size) snprintf(buf, size, "%s", nccl_version);
  pthread_mutex_unlock(&sen_env_lock);
  return n;
}

/* ---- fork ---- */

/* A fork while another thread holds a lock would leave it held forever in the child: take both locks around
 * fork. The child is a new process: it opens its own reads log, and the parent's reads are not its reads. */
static void before_fork(void) {
  pthread_mutex_lock(&sen_env_lock);
  tuner_lock_for_fork();
}

static void after_fork_parent(void) {
  tuner_unlock_after_fork();
  pthread_mutex_unlock(&sen_env_lock);
}

static void after_fork_child(void) {
  reads_log_reset_locked();
  tuner_forget_after_fork();
  after_fork_parent();
}

__attribute__((constructor)) static void setup(void) { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }
