"""C helpers shared by the native scanner (kineto_scan_c) and accumulator (kineto_accum_c):
a strict JSON reader for the plain shape of a Kineto trace (whitespace, strings with SSE2
scanning and UTF-8 validation, numbers, skipping values with bounded nesting) and the
generated key matchers (a switch on the key's length, then fixed-size compares).

Every reader takes the end of the buffer and returns NULL on anything it does not accept;
nothing reads past the end.
"""

from __future__ import annotations

from collections.abc import Sequence

COMMON = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef const uint8_t *P;
#define MAX_DEPTH 64
#define BIG_TIME 9007199254740992LL /* 2**53 */


static P ws(P p, P e) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* p at the opening quote; returns the byte after the closing quote, or NULL.
   *plain: no escapes. Declines control characters, malformed UTF-8 and \u escapes. */
static uint8_t SPECIAL[256]; /* '"', '\\', control characters and non-ASCII bytes */
static int special_ready = 0;

static void init_special(void) {
    for (int c = 0; c < 256; c++) SPECIAL[c] = (c < 0x20 || c >= 0x80 || c == '"' || c == '\\');
    special_ready = 1;
}

/* the first special byte in [p, e), or e (SSE2: 16 bytes per step; signed < 0x20 also
   catches the bytes >= 0x80) */
static P next_special(P p, P e) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        int m = _mm_movemask_epi8(_mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
            _mm_cmplt_epi8(v, space)));
        if (m) return p + __builtin_ctz((unsigned)m);
        p += 16;
    }
#endif
    while (p < e && !SPECIAL[*p]) p++;
    return p;
}

/* bytes in the UTF-8 sequence at p (well-formed: no overlong form, no surrogate, at most
   U+10FFFF), or 0 */
static int utf8_len(P p, P e) {
    uint8_t c = p[0], lo = 0x80, hi = 0xBF;
    int n;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (e - p < n || p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

static P str_end(P p, P e, int *plain) {
    p++;
    *plain = 1;
    while (p < e) {
        uint8_t c;
        p = next_special(p, e);
        if (p >= e) return NULL;
        c = *p;
        if (c == '"') return p + 1;
        if (c >= 0x80) {  /* UTF-8, copied as it is */
            int n = utf8_len(p, e);
            if (!n) return NULL;
            p += n;
            continue;
        }
        if (c < 0x20) return NULL;
        if (c == '\\') {
            uint8_t d;
            *plain = 0;
            if (p + 1 >= e) return NULL;
            d = p[1];
            if (d == '"' || d == '\\' || d == '/' || d == 'b' || d == 'f' || d == 'n' ||
                d == 'r' || d == 't') p += 2;
            else return NULL;
        } else {
            p++;
        }
    }
    return NULL;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The double nearest to the JSON float text [s, e): when its digits, read as one integer m,
   stay within 2**53 and there is no exponent, m / 10**k is one correctly rounded division of
   two exact doubles (the result strtod gives); otherwise strtod. NaN when the text is too
   long for it. */
static double to_double(P s, P e, int neg) {
    uint64_t m = 0;
    int digits = 0, frac = 0, dot = 0;
    P q = s + neg;
    for (; q < e; q++) {
        if (*q == '.') { dot = 1; continue; }
        if (*q < '0' || *q > '9') break;
        m = m * 10 + (uint64_t)(*q - '0');
        digits++;
        frac += dot;
        if (digits > 18) break;
    }
    if (q == e && m <= (1ULL << 53) && frac <= 22) {
        double v = (double)m / POW10[frac];
        return neg ? -v : v;
    } else {
        char tmp[64];
        size_t n = (size_t)(e - s);
        if (n >= sizeof tmp) return 0.0 / 0.0;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        return strtod(tmp, NULL);
    }
}

/* A JSON number: *is_int (1: an int of at most 18 digits, in *iv; 2: a longer int, no
   value; 0: a float, in *dv). */
static P number(P p, P e, int *is_int, int64_t *iv, double *dv) {
    P s = p, digits, int_end;
    int neg = 0, isint = 1;
    if (p < e && *p == '-') { neg = 1; p++; }
    if (p >= e) return NULL;
    digits = p;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < e && *p >= '0' && *p <= '9') p++; }
    else return NULL;
    int_end = p;
    if (p < e && *p == '.') {
        P d;
        isint = 0;
        p++;
        d = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == d) return NULL;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        P d;
        isint = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        d = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == d) return NULL;
    }
    *is_int = isint;
    if (isint && int_end - digits > 18) {
        *is_int = 2; /* valid, but too long for int64 here: only skipped */
    } else if (isint) {
        int64_t v = 0;
        for (P q = digits; q < int_end; q++) v = v * 10 + (*q - '0');
        *iv = neg ? -v : v;
    } else if (dv != NULL) {
        *dv = to_double(s, p, neg);
        if (*dv != *dv) return NULL;
    }
    return p;
}

static P literal(P p, P e, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(e - p) < n || memcmp(p, word, n) != 0) return NULL;
    return p + n;
}

static P skip_value(P p, P e, int depth);

static P skip_container(P p, P e, int depth, int object) {
    uint8_t close = object ? '}' : ']';
    if (depth > MAX_DEPTH) return NULL;
    p = ws(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
        if (object) {
            int plain;
            if (p >= e || *p != '"') return NULL;
            p = str_end(p, e, &plain);
            if (!p) return NULL;
            p = ws(p, e);
            if (p >= e || *p != ':') return NULL;
            p = ws(p + 1, e);
        }
        p = skip_value(p, e, depth + 1);
        if (!p) return NULL;
        p = ws(p, e);
        if (p >= e) return NULL;
        if (*p == ',') { p = ws(p + 1, e); continue; }
        if (*p == close) return p + 1;
        return NULL;
    }
}

static P skip_value(P p, P e, int depth) {
    int plain, is_int;
    int64_t iv;
    if (p >= e) return NULL;
    switch (*p) {
    case '"': return str_end(p, e, &plain);
    case '{': return skip_container(p, e, depth, 1);
    case '[': return skip_container(p, e, depth, 0);
    case 't': return literal(p, e, "true");
    case 'f': return literal(p, e, "false");
    case 'n': return literal(p, e, "null");
    default: return number(p, e, &is_int, &iv, NULL);
    }
}

/* generated: match_EVENT / match_ID / match_FLAG, key -> index */
@KEYS@
"""


def _c_string(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _matcher(name: str, keys: Sequence[str]) -> str:
    """``match_<name>(k, n)``: the index of the key [k, k + n) in ``keys``, or -1."""
    by_len: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        by_len.setdefault(len(k.encode()), []).append(i)
    cases = "".join(
        f"    case {n}:\n" + "".join(
            f"        if (memcmp(k, {_c_string(keys[i])}, {n}) == 0) return {i};\n"
            for i in idx) + "        return -1;\n"
        for n, idx in sorted(by_len.items()))
    return (f"static int match_{name}(P k, size_t n) {{\n    switch (n) {{\n{cases}"
            f"    default:\n        return -1;\n    }}\n}}\n")


def common(event_keys: Sequence[str], id_keys: Sequence[str], flag_keys: Sequence[str]) -> str:
    """The helpers, with matchers for the 8 event keys (ph, name, cat, pid, tid, ts, dur,
    args), the 4 id arg keys, and the arg keys that send an event's args to msgspec."""
    assert len(event_keys) == 8 and len(id_keys) == 4
    keys = (_matcher("EVENT", event_keys) + _matcher("ID", id_keys)
            + _matcher("FLAG", flag_keys))
    return COMMON.replace("@KEYS@", keys)
