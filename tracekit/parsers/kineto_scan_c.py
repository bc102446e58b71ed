"""C source of the native ``traceEvents`` scanner (compiled on first use by kineto_native).

The scanner reads one JSON array of events and writes, without building Python objects, the
columns tracekit reads from every event: ``ph`` / ``name`` / ``cat`` bytes, ``pid``, ``tid``,
``ts``, ``dur`` and the four id args. An event whose args hold any communication or
record_shapes key (``FLAG_KEYS``) gets the byte span of its args object; Python decodes those
few with msgspec.

It is deliberately strict: anything outside the plain shape of a Kineto trace (escapes in the
strings it copies, ``\\u`` escapes or non-ASCII bytes anywhere, duplicate keys, numbers that
need care, wrong types, deep nesting, invalid JSON) makes it decline the piece (return -1),
and the caller decodes that piece with the msgspec path, which then decides (and words any
error) exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence

# outputs, in the order of the pointer table the caller passes
INT_COLUMNS = ("pid", "tid", "ts", "dur", "external_id", "correlation", "py_id", "py_parent_id")
FLOAT_COLUMNS = ("ts", "dur")
STRING_COLUMNS = ("ph", "name", "cat")
# state codes per event and int column
NULL, INT, FLOAT, STRING = 0, 1, 2, 3

_TEMPLATE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef const uint8_t *P;
#define NI 8
#define NS 3
#define MAX_DEPTH 64
#define BIG_TIME 9007199254740992LL /* 2**53 */

typedef struct {
    int64_t cap;
    int64_t *ival;   /* NI * cap */
    double *dval;    /* 2 * cap: ts, dur as parsed floats */
    int8_t *state;   /* NI * cap */
    int32_t *soff;   /* NS * (cap + 1) */
    uint8_t *sdata;  /* NS * sstride */
    int8_t *snull;   /* NS * cap */
    int64_t *aoff;   /* cap */
    int64_t *alen;   /* cap, 0: no flagged key in args */
    const uint8_t *base;
    int64_t sstride; /* bytes per string column in sdata (at least len) */
    int32_t cursor[NS];
} Ctx;

static P ws(P p, P e) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static int is_hex(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* p at the opening quote; returns the byte after the closing quote, or NULL.
   *plain: no escapes. Declines control characters, non-ASCII bytes and \u escapes. */
static uint8_t SPECIAL[256]; /* '"', '\\', control characters and non-ASCII bytes */
static int special_ready = 0;

static void init_special(void) {
    for (int c = 0; c < 256; c++) SPECIAL[c] = (c < 0x20 || c >= 0x80 || c == '"' || c == '\\');
    special_ready = 1;
}

static P str_end(P p, P e, int *plain) {
    p++;
    *plain = 1;
    while (p < e) {
        uint8_t c;
        while (p + 4 <= e && !SPECIAL[p[0]] && !SPECIAL[p[1]] && !SPECIAL[p[2]] &&
               !SPECIAL[p[3]]) p += 4;
        while (p < e && !SPECIAL[*p]) p++;
        if (p >= e) return NULL;
        c = *p;
        if (c == '"') return p + 1;
        if (c < 0x20 || c >= 0x80) return NULL;
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

/* generated: key -> index tables */
@KEYS@

static int key_index(P k, size_t n, const char *const *keys, const size_t *lens, int count) {
    for (int j = 0; j < count; j++)
        if (lens[j] == n && keys[j][0] == k[0] && memcmp(keys[j], k, n) == 0) return j;
    return -1;
}

/* an int or null for column c of event i; floats, strings and booleans decline */
static P int_value(P p, P e, Ctx *x, int c, int64_t i, int allow_string) {
    int is_int;
    int64_t iv;
    if (*p == 'n') { p = literal(p, e, "null"); x->state[c * x->cap + i] = 0; return p; }
    if (*p == '"') {
        int plain;
        if (!allow_string) return NULL;
        x->state[c * x->cap + i] = 3;
        return str_end(p, e, &plain);
    }
    if (*p != '-' && (*p < '0' || *p > '9')) return NULL;
    p = number(p, e, &is_int, &iv, NULL);
    if (!p || is_int != 1) return NULL;
    x->ival[c * x->cap + i] = iv;
    x->state[c * x->cap + i] = 1;
    return p;
}

static P time_value(P p, P e, Ctx *x, int c, int64_t i) {
    int is_int;
    int64_t iv = 0;
    double dv = 0;
    if (*p == 'n') { p = literal(p, e, "null"); x->state[c * x->cap + i] = 0; return p; }
    if (*p != '-' && (*p < '0' || *p > '9')) return NULL;
    p = number(p, e, &is_int, &iv, &dv);
    if (!p || is_int == 2) return NULL;
    if (is_int) {
        if (iv > BIG_TIME || iv < -BIG_TIME) return NULL;
        x->ival[c * x->cap + i] = iv;
        x->dval[(c - 2) * x->cap + i] = (double)iv;
        x->state[c * x->cap + i] = 1;
    } else {
        x->dval[(c - 2) * x->cap + i] = dv;
        x->state[c * x->cap + i] = 2;
    }
    return p;
}

static P args_object(P p, P e, Ctx *x, int64_t i) {
    P start = p;
    int flag = 0;
    unsigned seen = 0;
    p = ws(p + 1, e);
    if (p < e && *p == '}') { p++; goto done; }
    for (;;) {
        int plain, which;
        P ks, ke;
        if (p >= e || *p != '"') return NULL;
        ks = p + 1;
        ke = str_end(p, e, &plain);
        if (!ke || !plain) return NULL;
        p = ws(ke, e);
        if (p >= e || *p != ':') return NULL;
        p = ws(p + 1, e);
        if (p >= e) return NULL;
        which = key_index(ks, (size_t)(ke - 1 - ks), ID_KEYS, ID_LENS, 4);
        if (which >= 0) {
            if (seen & (1u << which)) return NULL;
            seen |= 1u << which;
            p = int_value(p, e, x, 4 + which, i, 0);
        } else {
            if (key_index(ks, (size_t)(ke - 1 - ks), FLAG_KEYS, FLAG_LENS, N_FLAG) >= 0)
                flag = 1;
            p = skip_value(p, e, 2);
        }
        if (!p) return NULL;
        p = ws(p, e);
        if (p >= e) return NULL;
        if (*p == ',') { p = ws(p + 1, e); continue; }
        if (*p == '}') { p++; break; }
        return NULL;
    }
done:
    if (flag) {
        x->aoff[i] = start - x->base;
        x->alen[i] = p - start;
    }
    return p;
}

static P string_value(P p, P e, Ctx *x, int c, int64_t i) {
    int plain;
    P end;
    if (*p == 'n') return literal(p, e, "null");
    if (*p != '"') return NULL;
    end = str_end(p, e, &plain);
    if (!end || !plain) return NULL;
    memcpy(x->sdata + c * x->sstride + x->cursor[c], p + 1, (size_t)(end - p - 2));
    x->cursor[c] += (int32_t)(end - p - 2);
    x->snull[c * x->cap + i] = 0;
    return end;
}

static P event(P p, P e, Ctx *x, int64_t i) {
    unsigned seen = 0;
    for (int c = 0; c < NI; c++) x->state[c * x->cap + i] = 0;
    for (int c = 0; c < NS; c++) x->snull[c * x->cap + i] = 1;
    x->alen[i] = 0;
    p = ws(p + 1, e);
    if (p < e && *p == '}') { p++; goto done; }
    for (;;) {
        int plain, which;
        P ks, ke;
        if (p >= e || *p != '"') return NULL;
        ks = p + 1;
        ke = str_end(p, e, &plain);
        if (!ke || !plain) return NULL;
        p = ws(ke, e);
        if (p >= e || *p != ':') return NULL;
        p = ws(p + 1, e);
        if (p >= e) return NULL;
        which = key_index(ks, (size_t)(ke - 1 - ks), EVENT_KEYS, EVENT_LENS, 8);
        if (which >= 0) {
            if (seen & (1u << which)) return NULL;
            seen |= 1u << which;
        }
        switch (which) {
        case 0: case 1: case 2: p = string_value(p, e, x, which, i); break;
        case 3: case 4: p = int_value(p, e, x, which - 3, i, 1); break;
        case 5: case 6: p = time_value(p, e, x, which - 3, i); break;
        case 7: p = (*p == '{') ? args_object(p, e, x, i) : NULL; break;
        default: p = skip_value(p, e, 1);
        }
        if (!p) return NULL;
        p = ws(p, e);
        if (p >= e) return NULL;
        if (*p == ',') { p = ws(p + 1, e); continue; }
        if (*p == '}') { p++; break; }
        return NULL;
    }
done:
    for (int c = 0; c < NS; c++) x->soff[c * (x->cap + 1) + i + 1] = x->cursor[c];
    return p;
}

/* Returns the number of events, -1 to decline, -2 when cap is too small. */
int64_t tk_scan(const uint8_t *buf, int64_t len, int64_t cap, int64_t sstride, void **out) {
    Ctx x;
    P p, e = buf + len;
    int64_t n = 0;
    x.cap = cap;
    x.ival = (int64_t *)out[0];
    x.dval = (double *)out[1];
    x.state = (int8_t *)out[2];
    x.soff = (int32_t *)out[3];
    x.sdata = (uint8_t *)out[4];
    x.snull = (int8_t *)out[5];
    x.aoff = (int64_t *)out[6];
    x.alen = (int64_t *)out[7];
    x.base = buf;
    x.sstride = sstride;
    if (!special_ready) init_special();
    for (int c = 0; c < NS; c++) { x.cursor[c] = 0; x.soff[c * (cap + 1)] = 0; }
    if (len >= 0x7fffffff || sstride < len) return -1;
    p = ws(buf, e);
    if (p >= e || *p != '[') return -1;
    p = ws(p + 1, e);
    if (p < e && *p == ']') { p++; goto end; }
    for (;;) {
        if (p >= e || *p != '{') return -1;
        if (n >= cap) return -2;
        p = event(p, e, &x, n);
        if (!p) return -1;
        n++;
        p = ws(p, e);
        if (p >= e) return -1;
        if (*p == ',') { p = ws(p + 1, e); continue; }
        if (*p == ']') { p++; break; }
        return -1;
    }
end:
    p = ws(p, e);
    return p == e ? n : -1;
}
"""


def _c_table(name: str, keys: Sequence[str]) -> str:
    quoted = ", ".join('"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"' for k in keys)
    lens = ", ".join(str(len(k.encode())) for k in keys)
    return (f"static const char *const {name}_KEYS[] = {{{quoted}}};\n"
            f"static const size_t {name}_LENS[] = {{{lens}}};\n")


def source(event_keys: Sequence[str], id_keys: Sequence[str], flag_keys: Sequence[str]) -> str:
    """The C source with its key tables: the 8 event keys (ph, name, cat, pid, tid, ts, dur,
    args), the 4 id arg keys, and the arg keys that send an event's args to msgspec."""
    assert len(event_keys) == 8 and len(id_keys) == 4
    keys = (_c_table("EVENT", event_keys) + _c_table("ID", id_keys) + _c_table("FLAG", flag_keys)
            + f"#define N_FLAG {len(flag_keys)}\n")
    return _TEMPLATE.replace("@KEYS@", keys)
