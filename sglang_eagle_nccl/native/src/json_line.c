/* Building one JSON line: the reads log must stay valid JSON whatever bytes an environment value holds. */
#include "sen_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

void sb_add(sbuf_t* b, const char* s, size_t n) {
  if (b->oom) return;
  if (sen_grow((void**)&b->p, &b->cap, 1, b->len + n + 1)) {
    b->oom = 1;
    return;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void sb_str(sbuf_t* b, const char* s) { sb_add(b, s, strlen(s)); }

/* Short formatted pieces only (numbers): longer output is cut at 95 characters. */
void sb_fmt(sbuf_t* b, const char* fmt, ...) {
  char tmp[96];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Length of the valid UTF-8 sequence at s (strict, like Python's decoder), or 0 if invalid. */
static size_t utf8_len(const unsigned char* s) {
  unsigned char c = s[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F; /* no UTF-16 surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
  } else return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return n;
}

/* A JSON string (or null). Environment values may hold any bytes: valid UTF-8 passes through, control
 * characters are escaped, and each byte that is not valid UTF-8 becomes \udcXX, the code point Python's
 * surrogateescape gives it, so json.loads() yields exactly what os.environ shows for the same bytes. */
void sb_json(sbuf_t* b, const char* s) {
  if (s == NULL) {
    sb_str(b, "null");
    return;
  }
  static const char hex[] = "0123456789abcdef";
  const unsigned char* u = (const unsigned char*)s;
  sb_add(b, "\"", 1);
  while (*u) {
    unsigned char c = *u;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      sb_add(b, esc, 2);
      u++;
    } else if (c < 0x20) {
      memcpy(esc, "\\u00", 4);
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      sb_add(b, esc, 6);
      u++;
    } else if (c < 0x80) {
      sb_add(b, (const char*)u, 1);
      u++;
    } else {
      size_t n = utf8_len(u);
      if (n) {
        sb_add(b, (const char*)u, n);
        u += n;
      } else {
        memcpy(esc, "\\udc", 4);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        sb_add(b, esc, 6);
        u++;
      }
    }
  }
  sb_add(b, "\"", 1);
}

/* Common head of every line. */
void sb_head(sbuf_t* b, const char* event) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  sb_str(b, "{\"event\":");
  sb_json(b, event);
  sb_fmt(b, ",\"pid\":%ld", (long)getpid());
  sb_fmt(b, ",\"time\":%lld.%06ld", (long long)ts.tv_sec, (long)(ts.tv_nsec / 1000));
}
