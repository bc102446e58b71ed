"""C source of the native ``traceEvents`` scanner (compiled on first use by kineto_native).

The scanner reads one JSON array of events and writes, without building Python objects, the
columns tracekit reads from every event: ``ph`` / ``name`` / ``cat`` bytes, ``pid``, ``tid``,
``ts``, ``dur`` and the four id args. An event whose args hold any communication or
record_shapes key (``FLAG_KEYS``) gets the byte span of its args object; Python decodes those
few with msgspec.

It is deliberately strict: anything outside the plain shape of a Kineto trace (escapes in the
strings it copies, ``\\u`` escapes or malformed UTF-8 anywhere, duplicate keys, numbers that
need care, wrong types, deep nesting, invalid JSON) makes it decline the piece (return -1),
and the caller decodes that piece with the msgspec path, which then decides (and words any
error) exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracekit.parsers import kineto_json_c as J

# outputs, in the order of the pointer table the caller passes
INT_COLUMNS = ("pid", "tid", "ts", "dur", "external_id", "correlation", "py_id", "py_parent_id")
FLOAT_COLUMNS = ("ts", "dur")
STRING_COLUMNS = ("ph", "name", "cat")
# state codes per event and int column
NULL, INT, FLOAT, STRING = 0, 1, 2, 3

_SCANNER = r"""
#define NI 8
#define NS 3

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
        which = match_ID(ks, (size_t)(ke - 1 - ks));
        if (which >= 0) {
            if (seen & (1u << which)) return NULL;
            seen |= 1u << which;
            p = int_value(p, e, x, 4 + which, i, 0);
        } else {
            if (match_FLAG(ks, (size_t)(ke - 1 - ks)) >= 0)
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
        which = match_EVENT(ks, (size_t)(ke - 1 - ks));
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


def source(event_keys: Sequence[str], id_keys: Sequence[str], flag_keys: Sequence[str]) -> str:
    """The scanner's C source: the shared helpers (kineto_json_c) with their key matchers
    (see ``kineto_json_c.common``), then the scanner."""
    return J.common(event_keys, id_keys, flag_keys) + _SCANNER
