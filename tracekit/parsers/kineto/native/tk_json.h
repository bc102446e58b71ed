/* A strict JSON reader for the plain shape of a Kineto trace: whitespace, strings with SSE2
   scanning and UTF-8 validation, numbers, skipping values with bounded nesting.

   Every reader takes the end of the buffer and returns NULL on anything it does not accept;
   nothing reads past the end. The common cases are inline fast paths that give exactly what
   the general reader gives: no whitespace; a string whose closing quote is the first special
   byte of the next 16; a short non-negative int read from one 8-byte word; digit runs 8 bytes
   per step (SWAR, little-endian only). */
#ifndef TK_JSON_H
#define TK_JSON_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef const uint8_t *P;
#define MAX_DEPTH 64
#define BIG_TIME 9007199254740992LL /* 2**53 */


static inline P ws(P p, P e) {
    if (p < e && *p > ' ') return p; /* the common case: no whitespace */
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* p at the opening quote; returns the byte after the closing quote, or NULL.
   *plain: no escapes. Declines control characters, malformed UTF-8 and \u escapes. */
/* '"', '\\', control characters and non-ASCII bytes: a constant table, so that readers in
   several threads share no state that is written (each accumulator owns all it changes) */
#define TK_R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
static const uint8_t SPECIAL[256] = {
    TK_R16(1), TK_R16(1),                           /* 0x00-0x1f: control characters */
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x20-0x2f: '"' (0x22) */
    TK_R16(0), TK_R16(0),                           /* 0x30-0x4f */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* 0x50-0x5f: '\\' (0x5c) */
    TK_R16(0), TK_R16(0),                           /* 0x60-0x7f */
    TK_R16(1), TK_R16(1), TK_R16(1), TK_R16(1),     /* 0x80-0xff: non-ASCII */
    TK_R16(1), TK_R16(1), TK_R16(1), TK_R16(1)};
#undef TK_R16

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

static P str_end_slow(P p, P e, int *plain);

/* the common case inline: a string whose first special byte, within 16, is its closing
   quote (plain, nothing to check); anything else is read by str_end_slow */
static inline __attribute__((always_inline)) P str_end(P p, P e, int *plain) {
#if defined(__SSE2__)
    if (e - p > 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 1));
        int m = _mm_movemask_epi8(_mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                         _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
            _mm_cmplt_epi8(v, _mm_set1_epi8(0x20))));
        if (m) {
            P q = p + 1 + __builtin_ctz((unsigned)m);
            if (*q == '"') { *plain = 1; return q + 1; }
        }
    }
#endif
    return str_end_slow(p, e, plain);
}

static P str_end_slow(P p, P e, int *plain) {
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

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TK_SWAR 1
static const uint64_t POW10I[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                  100000000};

/* how many of the 8 bytes of w (first byte lowest) lead with ASCII digits: a byte b is a
   digit when b and b + 6 both have high nibble 3 (a carry out of b + 6 needs b >= 0xFA, not
   a digit, and only reaches later bytes) */
static inline int digits8(uint64_t w) {
    const uint64_t hi = 0xF0F0F0F0F0F0F0F0ULL, three = 0x3030303030303030ULL;
    uint64_t bad = ((w & hi) ^ three) | (((w + 0x0606060606060606ULL) & hi) ^ three);
    return bad ? __builtin_ctzll(bad) >> 3 : 8;
}

/* the value of the first n (1..8) digits of w: moved to the top bytes (zeros before them),
   then pairs, quads and the eight combined in place */
static inline uint64_t value8(uint64_t w, int n) {
    w = (w & 0x0F0F0F0F0F0F0F0FULL) << (8 * (8 - n));
    w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFULL;
    w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFULL;
    return (w * 10000 + (w >> 32)) & 0xFFFFFFFFULL;
}
#endif

/* the end of the run of digits at p, and its value in *val (modulo 2**64) */
static inline P digit_run(P p, P e, uint64_t *val) {
    uint64_t v = 0;
#ifdef TK_SWAR
    while (e - p >= 8) {
        uint64_t w;
        int n;
        memcpy(&w, p, 8);
        n = digits8(w);
        if (n) v = v * POW10I[n] + value8(w, n);
        p += n;
        if (n < 8) { *val = v; return p; }
    }
#endif
    for (; p < e && *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
    *val = v;
    return p;
}

/* the end of the run of digits at p */
static inline P skip_digits(P p, P e) {
#ifdef TK_SWAR
    while (e - p >= 8) {
        uint64_t w;
        int n;
        memcpy(&w, p, 8);
        n = digits8(w);
        p += n;
        if (n < 8) return p;
    }
#endif
    while (p < e && *p >= '0' && *p <= '9') p++;
    return p;
}

static P number_slow(P p, P e, int *is_int, int64_t *iv, double *dv);

/* A JSON number: *is_int (1: an int of at most 18 digits, in *iv; 2: a longer int, no
   value; 0: a float, in *dv). Inline: an int of 1 to 7 digits, not negative, read from one
   8-byte word (the byte after it is in the word: neither '.', 'e' nor 'E' may follow, and
   a leading 0 is only the int 0); anything else: number_slow. */
static inline P number(P p, P e, int *is_int, int64_t *iv, double *dv) {
#ifdef TK_SWAR
    if (e - p >= 8) {
        uint64_t w;
        int n;
        memcpy(&w, p, 8);
        n = digits8(w);
        if (n >= 1 && n < 8 && (p[0] != '0' || n == 1) && p[n] != '.' && (p[n] | 0x20) != 'e') {
            *is_int = 1;
            *iv = (int64_t)value8(w, n);
            return p + n;
        }
    }
#endif
    return number_slow(p, e, is_int, iv, dv);
}

static P number_slow(P p, P e, int *is_int, int64_t *iv, double *dv) {
    P s = p, digits, int_end;
    int neg = 0, isint = 1;
    uint64_t v = 0;
    if (p < e && *p == '-') { neg = 1; p++; }
    if (p >= e) return NULL;
    digits = p;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') p = digit_run(p, e, &v);
    else return NULL;
    int_end = p;
    if (p < e && *p == '.') {
        P d;
        isint = 0;
        p++;
        d = p;
        p = skip_digits(p, e);
        if (p == d) return NULL;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        P d;
        isint = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        d = p;
        p = skip_digits(p, e);
        if (p == d) return NULL;
    }
    *is_int = isint;
    if (isint && int_end - digits > 18) {
        *is_int = 2; /* valid, but too long for int64 here: only skipped */
    } else if (isint) {
        *iv = neg ? -(int64_t)v : (int64_t)v;
    } else if (dv != NULL) {
        *dv = to_double(s, p, neg);
        if (*dv != *dv) return NULL;
    }
    return p;
}

/* A JSON number of microseconds at p as exact integer nanoseconds (for ts / dur): an int
   (|v| <= 2**53) times 1000; a float written -?d+.d+ with at most 16 whole digits (at most
   MICROS_MAX_WHOLE) and at most 3 decimals (Kineto's %.3f), as its digits. The end, or
   NULL: not a number, or any other form (more decimals, an exponent, a longer int). */
#define MICROS_MAX_WHOLE 9223372036854774LL /* (2**63 - 1 - 999) / 1000 */

static inline P micros_ns(P p, P e, int64_t *ns) {
    static const int64_t FRAC_SCALE[] = {1000, 100, 10, 1};
    P digits, d;
    int neg = 0;
    uint64_t whole = 0, frac = 0;
    int64_t v;
    if (p < e && *p == '-') { neg = 1; p++; }
    if (p >= e) return NULL;
    digits = p;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') p = digit_run(p, e, &whole);
    else return NULL;
    if (p < e && (*p == 'e' || *p == 'E')) return NULL;
    if (p >= e || *p != '.') { /* an int */
        if (p - digits > 18 || whole > (uint64_t)BIG_TIME) return NULL;
        v = (int64_t)whole * 1000;
        *ns = neg ? -v : v;
        return p;
    }
    if (p - digits > 16 || whole > (uint64_t)MICROS_MAX_WHOLE) return NULL;
    d = ++p;
    p = digit_run(p, e, &frac);
    if (p == d || p - d > 3) return NULL;
    if (p < e && (*p == 'e' || *p == 'E')) return NULL;
    v = (int64_t)whole * 1000 + (int64_t)frac * FRAC_SCALE[p - d];
    *ns = neg ? -v : v;
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
#endif
