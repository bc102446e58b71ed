/* The whole-file Kineto accumulator, a CPython extension module (tracekit.parsers.kineto.native._accum).

   It keeps the columns of a whole file in growing C arrays, fed one block of events at a
   time, and finishes them itself:

   - only the timed events (ph X or i) get a row; every event still gets its index;
   - name and cat become dictionary codes (one dictionary per file, values in order of first
     appearance over the events it read);
   - ts / dur become exact integer nanoseconds from their text (ints, and floats with at most
     three decimals: what both rules of kineto_decode.exact_ns give them);
   - ids get an Arrow validity bitmap;
   - the communication args of a timed event are read here into one row per event, when every
     value has the plain form the strict msgspec decoder gives: a string without escapes, an
     int of at most 18 digits (a uint64 for Comms Id), or null. Strings get codes in a third
     dictionary;
   - the few events whose args carry record_shapes or thread-name keys, or a communication
     value of any other form, are listed (index, row, phase, name code, pid, tid, comm state
     and the span of the args object in the block) for Python to decode with msgspec.

   Anything unusual, a bad event, or a float time with more than three decimals or an
   exponent, fails the block: its rows are rolled back and the caller decodes that block with
   msgspec (tk_acc_skip then counts its events).

   The C functions (tk_*) are called through ctypes, which releases the GIL for the call; the
   module itself only exports the key tables, so that Python can check them against its
   msgspec decoder. They touch no Python object, and the only state they write is the
   accumulator they are given (the tables they read are constants): several files can be
   read at once in several threads, one accumulator each. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "tk_json.h"
#include "tk_keys.h"
#include "tk_dict.h"

#define TK_API __attribute__((visibility("default")))

enum { COMM_NONE_ = 0, COMM_READ_ = 1, COMM_SLOW_ = 2 };


enum { PH_NONE = -1, PH_OTHER, PH_X, PH_I, PH_M, PH_FLOW };
#define TIMED(k) ((k) == PH_X || (k) == PH_I)

typedef struct {
    int64_t rows, rcap, events, flags, fcap;
    int64_t *ri[9];   /* ROW_INT64 */
    int32_t *rc[2];   /* ROW_INT32 */
    uint8_t *rv[10];  /* ROW_VALID bitmaps */
    int64_t *fi[7];   /* FLAG_INT64 */
    int8_t *fb[4];    /* FLAG_INT8 */
    Dict dict[3];     /* name, cat, communication strings */
    /* communication rows: event index, and per COMM field its value (int, uint64 bits or
       string code) and whether it has one */
    int64_t crows, ccap;
    int64_t *cev;
    int64_t *cval[NCOMM];
    int8_t *cok[NCOMM];
    /* the communication args of the event being read: state 0 absent, 1 null, 2 a value */
    int64_t ev_val[NCOMM];
    int8_t ev_state[NCOMM];
    int ev_any, ev_slow;
    int oom;
    const uint8_t *base;
    /* the event being read */
    int ph_kind;      /* PH_* */
    int64_t aoff, alen, fpid, ftid;
    int8_t fps, fts;
} Acc;

static int grow_rows(Acc *a) {
    int64_t cap = a->rcap ? a->rcap * 2 : 65536;
    for (int c = 0; c < 9; c++) {
        int64_t *q = (int64_t *)realloc(a->ri[c], sizeof(int64_t) * (size_t)cap);
        if (!q) return -1;
        a->ri[c] = q;
    }
    for (int c = 0; c < 2; c++) {
        int32_t *q = (int32_t *)realloc(a->rc[c], sizeof(int32_t) * (size_t)cap);
        if (!q) return -1;
        a->rc[c] = q;
    }
    for (int c = 0; c < 10; c++) {
        uint8_t *q = (uint8_t *)realloc(a->rv[c], (size_t)(cap / 8));
        if (!q) return -1;
        memset(q + a->rcap / 8, 0, (size_t)((cap - a->rcap) / 8));
        a->rv[c] = q;
    }
    a->rcap = cap;
    return 0;
}

static int grow_flags(Acc *a) {
    int64_t cap = a->fcap ? a->fcap * 2 : 4096;
    for (int c = 0; c < 7; c++) {
        int64_t *q = (int64_t *)realloc(a->fi[c], sizeof(int64_t) * (size_t)cap);
        if (!q) return -1;
        a->fi[c] = q;
    }
    for (int c = 0; c < 4; c++) {
        int8_t *q = (int8_t *)realloc(a->fb[c], (size_t)cap);
        if (!q) return -1;
        a->fb[c] = q;
    }
    a->fcap = cap;
    return 0;
}

static int grow_comm(Acc *a) {
    int64_t cap = a->ccap ? a->ccap * 2 : 1024;
    int64_t *q = (int64_t *)realloc(a->cev, sizeof(int64_t) * (size_t)cap);
    if (!q) return -1;
    a->cev = q;
    for (int c = 0; c < NCOMM; c++) {
        int64_t *v = (int64_t *)realloc(a->cval[c], sizeof(int64_t) * (size_t)cap);
        if (!v) return -1;
        a->cval[c] = v;
        int8_t *k = (int8_t *)realloc(a->cok[c], (size_t)cap);
        if (!k) return -1;
        a->cok[c] = k;
    }
    a->ccap = cap;
    return 0;
}

/* one communication value; anything but the plain form marks the event slow (msgspec then
   decodes its args); NULL only for text that is not JSON */
static P acc_comm(P p, P e, Acc *a, int k) {
    int plain, is_int;
    int64_t iv;
    P q;
    a->ev_any = 1;
    if (a->ev_state[k]) { a->ev_slow = 1; return skip_value(p, e, 2); } /* a repeated key */
    if (*p == 'n') { a->ev_state[k] = 1; return literal(p, e, "null"); }
    if (COMM_KIND[k] == 0) {
        int32_t code;
        if (*p != '"') { a->ev_slow = 1; return skip_value(p, e, 2); }
        q = str_end(p, e, &plain);
        if (!q) return NULL;
        if (!plain) { a->ev_slow = 1; return q; }
        code = dict_code(&a->dict[2], p + 1, (size_t)(q - p - 2));
        if (code < 0) { a->oom = 1; return NULL; }
        a->ev_val[k] = code;
        a->ev_state[k] = 2;
        return q;
    }
    if (*p != '-' && (*p < '0' || *p > '9')) { a->ev_slow = 1; return skip_value(p, e, 2); }
    q = number(p, e, &is_int, &iv, NULL);
    if (!q) return NULL;
    if (COMM_KIND[k] == 1) {
        if (is_int != 1) { a->ev_slow = 1; return q; }
        a->ev_val[k] = iv;
        a->ev_state[k] = 2;
        return q;
    }
    /* uint64: a non-negative int of at most 20 digits that fits */
    if (!is_int || *p == '-' || q - p > 20) { a->ev_slow = 1; return q; }
    {
        uint64_t u = 0;
        for (P d = p; d < q; d++) {
            uint64_t digit = (uint64_t)(*d - '0');
            if (u > (UINT64_MAX - digit) / 10) { a->ev_slow = 1; return q; }
            u = u * 10 + digit;
        }
        memcpy(&a->ev_val[k], &u, sizeof u);
    }
    a->ev_state[k] = 2;
    return q;
}

static void set_valid(Acc *a, int c, int64_t r, int v) {
    uint8_t bit = (uint8_t)(1u << (r & 7));
    if (v) a->rv[c][r >> 3] |= bit;
    else a->rv[c][r >> 3] &= (uint8_t)~bit;
}

/* row columns: ri 1 pid, 2 tid, 3 ts, 4 dur, 5..8 ids; rv index = ri index - 1 + 1 */
static void put_int(Acc *a, int ri, int64_t r, int64_t v, int valid) {
    a->ri[ri][r] = valid ? v : 0;
    set_valid(a, ri + 1, r, valid);
}

static P acc_int(P p, P e, Acc *a, int ri, int64_t r, int is_pid) {
    int is_int;
    int64_t iv;
    if (*p == 'n') {
        put_int(a, ri, r, 0, 0);
        if (is_pid) { if (ri == 1) a->fps = 0; else a->ftid = 0, a->fts = 0; }
        return literal(p, e, "null");
    }
    if (*p == '"') {
        int plain;
        if (!is_pid) return NULL;
        put_int(a, ri, r, 0, 0);
        if (ri == 1) a->fps = 3; else a->fts = 3;
        return str_end(p, e, &plain);
    }
    if (*p != '-' && (*p < '0' || *p > '9')) return NULL;
    p = number(p, e, &is_int, &iv, NULL);
    if (!p || is_int != 1) return NULL;
    put_int(a, ri, r, iv, 1);
    if (is_pid) {
        if (ri == 1) { a->fpid = iv; a->fps = 1; } else { a->ftid = iv; a->fts = 1; }
    }
    return p;
}

/* ts / dur in exact integer nanoseconds from the number's text (kineto_json_c.micros_ns: an
   int times 1000; a float written d+.ddd, at most 3 decimals and no exponent, as its
   digits, which is what both rules of kineto_decode give it); any other number fails the
   block (the piece path then decides). */
static P acc_time(P p, P e, Acc *a, int ri, int64_t r) {
    int64_t ns;
    if (*p == 'n') { put_int(a, ri, r, 0, 0); return literal(p, e, "null"); }
    if (*p != '-' && (*p < '0' || *p > '9')) return NULL;
    p = micros_ns(p, e, &ns);
    if (!p) return NULL;
    put_int(a, ri, r, ns, 1);
    return p;
}

static P acc_args(P p, P e, Acc *a, int64_t r) {
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
            p = acc_int(p, e, a, 5 + which, r, 0);
        } else {
            int k = match_FLAG(ks, (size_t)(ke - 1 - ks));
            if (k >= 0 && k < NCOMM) {
                p = acc_comm(p, e, a, k);
            } else {
                if (k >= 0) flag = 1;
                p = skip_value(p, e, 2);
            }
        }
        if (!p) return NULL;
        p = ws(p, e);
        if (p >= e) return NULL;
        if (*p == ',') { p = ws(p + 1, e); continue; }
        if (*p == '}') { p++; break; }
        return NULL;
    }
done:
    if (flag || a->ev_slow) {
        a->aoff = start - a->base;
        a->alen = p - start;
    }
    return p;
}

static P acc_string(P p, P e, Acc *a, int c, int64_t r) {
    int plain;
    P end;
    int32_t code;
    if (*p == 'n') { a->rc[c][r] = 0; set_valid(a, c, r, 0); return literal(p, e, "null"); }
    if (*p != '"') return NULL;
    end = str_end(p, e, &plain);
    if (!end || !plain) return NULL;
    code = dict_code(&a->dict[c], p + 1, (size_t)(end - p - 2));
    if (code < 0) { a->oom = 1; return NULL; }
    a->rc[c][r] = code;
    set_valid(a, c, r, 1);
    return end;
}

static P acc_ph(P p, P e, Acc *a) {
    int plain;
    P end;
    if (*p == 'n') { a->ph_kind = PH_NONE; return literal(p, e, "null"); }
    if (*p != '"') return NULL;
    end = str_end(p, e, &plain);
    if (!end || !plain) return NULL;
    a->ph_kind = PH_OTHER;
    if (end - p == 3) {
        if (p[1] == 'X') a->ph_kind = PH_X;
        else if (p[1] == 'i') a->ph_kind = PH_I;
        else if (p[1] == 'M') a->ph_kind = PH_M;
        else if (p[1] == 's' || p[1] == 'f') a->ph_kind = PH_FLOW;
    }
    return end;
}

/* one event into row slot r (kept only when timed); NULL: fail the block */
static P acc_event(P p, P e, Acc *a, int64_t r) {
    unsigned seen = 0;
    for (int c = 0; c < 10; c++) set_valid(a, c, r, 0);
    a->rc[0][r] = a->rc[1][r] = 0;
    for (int c = 1; c < 9; c++) a->ri[c][r] = 0;
    a->ph_kind = PH_NONE;
    a->alen = 0;
    if (a->ev_any) { memset(a->ev_state, 0, sizeof a->ev_state); a->ev_any = 0; }
    a->ev_slow = 0;
    a->fpid = a->ftid = 0;
    a->fps = a->fts = 0;
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
        case 0: p = acc_ph(p, e, a); break;
        case 1: case 2: p = acc_string(p, e, a, which - 1, r); break;
        case 3: case 4: p = acc_int(p, e, a, which - 2, r, 1); break;
        case 5: case 6: p = acc_time(p, e, a, which - 2, r); break;
        case 7: p = (*p == '{') ? acc_args(p, e, a, r) : NULL; break;
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
    /* the checks of kineto_block_columns._check: ph everywhere, ts on X i s f (not M: optional
       there in the Chrome trace format), dur on X */
    if (a->ph_kind == PH_NONE) return NULL;
    if (a->ph_kind != PH_OTHER && a->ph_kind != PH_M && !(a->rv[4][r >> 3] & (1u << (r & 7))))
        return NULL;
    if (a->ph_kind == PH_X && !(a->rv[5][r >> 3] & (1u << (r & 7)))) return NULL;
    return p;
}

TK_API Acc *tk_acc_new(void) {
    return (Acc *)calloc(1, sizeof(Acc));
}

TK_API void tk_acc_free(Acc *a) {
    if (!a) return;
    for (int c = 0; c < 9; c++) free(a->ri[c]);
    for (int c = 0; c < 2; c++) free(a->rc[c]);
    for (int c = 0; c < 10; c++) free(a->rv[c]);
    for (int c = 0; c < 7; c++) free(a->fi[c]);
    for (int c = 0; c < 4; c++) free(a->fb[c]);
    free(a->cev);
    for (int c = 0; c < NCOMM; c++) { free(a->cval[c]); free(a->cok[c]); }
    for (int c = 0; c < 3; c++) { free(a->dict[c].data); free(a->dict[c].off);
                                  free(a->dict[c].slots); }
    free(a);
}

/* the index after the '}' of the last "} , {" in [buf, buf + len), or 0 */
static int64_t last_boundary(P buf, int64_t len) {
    int64_t i;
    for (i = len - 1; i > 0; i--) {
        int64_t j;
        if (buf[i] != '{') continue;
        j = i - 1;
        while (j > 0 && (buf[j] == ' ' || buf[j] == '\n' || buf[j] == '\r' || buf[j] == '\t')) j--;
        if (buf[j] != ',') continue;
        j--;
        while (j > 0 && (buf[j] == ' ' || buf[j] == '\n' || buf[j] == '\r' || buf[j] == '\t')) j--;
        if (j >= 0 && buf[j] == '}') return j + 1;
    }
    return 0;
}

/* Read the events of [buf, buf + len): an optional leading ',' then events separated by
   ','. Unless whole, only up to the last event boundary (*used: the bytes consumed).
   Returns the events read, or -1 (the block's rows, events and flags are rolled back). */
TK_API int64_t tk_acc_feed(Acc *a, const uint8_t *buf, int64_t len, int whole, int64_t *used) {
    int64_t rows0 = a->rows, events0 = a->events, flags0 = a->flags, crows0 = a->crows, n = 0;
    int32_t dn[3], dl[3];
    int64_t end = whole ? len : last_boundary(buf, len);
    P p, e = buf + end;
    *used = 0;
    for (int c = 0; c < 3; c++) { dn[c] = a->dict[c].n; dl[c] = a->dict[c].dlen; }
    if (end <= 0) return 0;
    a->base = buf;
    p = ws(buf, e);
    if (p < e && *p == ',') p = ws(p + 1, e);
    while (p < e) {
        int comm;
        if (*p != '{') goto fail;
        if (a->rows >= a->rcap && grow_rows(a) < 0) { a->oom = 1; goto fail; }
        p = acc_event(p, e, a, a->rows);
        if (!p) goto fail;
        if (TIMED(a->ph_kind)) a->ri[0][a->rows] = a->events;
        comm = COMM_NONE_;
        if (a->ev_slow) {
            comm = COMM_SLOW_;
        } else if (a->ev_any && TIMED(a->ph_kind) &&
                   (a->ev_state[0] == 2 || a->ev_state[2] == 2 || a->ev_state[4] == 2)) {
            /* a communication row (kineto_native_reader._has_comm: a collective name, In msg
               nelems or In msg size) */
            int64_t c = a->crows;
            if (c >= a->ccap && grow_comm(a) < 0) { a->oom = 1; goto fail; }
            a->cev[c] = a->events;
            for (int k = 0; k < NCOMM; k++) {
                int has = a->ev_state[k] == 2;
                a->cval[k][c] = has ? a->ev_val[k] : 0;
                a->cok[k][c] = (int8_t)has;
            }
            a->crows++;
            comm = COMM_READ_;
        }
        if (a->alen > 0) {
            int64_t f = a->flags;
            if (f >= a->fcap && grow_flags(a) < 0) { a->oom = 1; goto fail; }
            a->fi[0][f] = a->events;
            a->fi[1][f] = TIMED(a->ph_kind) ? a->rows : -1;
            a->fi[2][f] = a->fpid;
            a->fi[3][f] = a->ftid;
            a->fi[4][f] = a->aoff;
            a->fi[5][f] = a->alen;
            a->fi[6][f] = (a->rv[0][a->rows >> 3] & (1u << (a->rows & 7))) ? a->rc[0][a->rows] : -1;
            a->fb[0][f] = (int8_t)(TIMED(a->ph_kind) ? 1 : a->ph_kind == PH_M ? 2 : 0);
            a->fb[1][f] = a->fps;
            a->fb[2][f] = a->fts;
            a->fb[3][f] = (int8_t)comm;
            a->flags++;
        }
        if (TIMED(a->ph_kind)) a->rows++;
        a->events++;
        n++;
        p = ws(p, e);
        if (p >= e) break;
        if (*p != ',') goto fail;
        p = ws(p + 1, e);
        if (p >= e) goto fail;
    }
    *used = end;
    return n;
fail:
    a->rows = rows0;
    a->events = events0;
    a->flags = flags0;
    a->crows = crows0;
    for (int c = 0; c < 3; c++) { a->dict[c].n = dn[c]; a->dict[c].dlen = dl[c]; }
    return -1;
}

/* the index after the '}' of the last event boundary "} , {" in [buf, buf + len), or 0 */
TK_API int64_t tk_boundary(const uint8_t *buf, int64_t len) {
    return last_boundary(buf, len);
}

/* reading is over: free what only reading needs (flags, hash slots) */
TK_API void tk_acc_done(Acc *a) {
    for (int c = 0; c < 7; c++) { free(a->fi[c]); a->fi[c] = NULL; }
    for (int c = 0; c < 4; c++) { free(a->fb[c]); a->fb[c] = NULL; }
    a->fcap = a->flags = 0;
    free(a->cev);
    a->cev = NULL;
    for (int c = 0; c < NCOMM; c++) { free(a->cval[c]); free(a->cok[c]);
                                      a->cval[c] = NULL; a->cok[c] = NULL; }
    a->ccap = a->crows = 0;
    for (int c = 0; c < 3; c++) {
        free(a->dict[c].slots);
        a->dict[c].slots = NULL;
        a->dict[c].nslots = 0;
    }
}

TK_API void tk_acc_info(Acc *a, int64_t *out) {
    out[0] = a->rows; out[1] = a->events; out[2] = a->flags;
    out[3] = a->dict[0].n; out[4] = a->dict[1].n;
    out[5] = a->crows; out[6] = a->dict[2].n;
}

/* pointers: ROW_INT64, ROW_INT32, ROW_VALID, FLAG_INT64, FLAG_INT8, then per dictionary
   (name, cat) its offsets and data */
TK_API void tk_acc_arrays(Acc *a, void **out) {
    int k = 0;
    for (int c = 0; c < 9; c++) out[k++] = a->ri[c];
    for (int c = 0; c < 2; c++) out[k++] = a->rc[c];
    for (int c = 0; c < 10; c++) out[k++] = a->rv[c];
    for (int c = 0; c < 7; c++) out[k++] = a->fi[c];
    for (int c = 0; c < 4; c++) out[k++] = a->fb[c];
    for (int c = 0; c < 2; c++) { out[k++] = a->dict[c].off; out[k++] = a->dict[c].data; }
}

/* the communication rows: event index, NCOMM value arrays, NCOMM has-value arrays, then the
   offsets and data of their strings' dictionary */
TK_API void tk_acc_comm(Acc *a, void **out) {
    int k = 0;
    out[k++] = a->cev;
    for (int c = 0; c < NCOMM; c++) out[k++] = a->cval[c];
    for (int c = 0; c < NCOMM; c++) out[k++] = a->cok[c];
    out[k++] = a->dict[2].off;
    out[k++] = a->dict[2].data;
}

/* events of a block decoded elsewhere (msgspec): they still count in the event index */
TK_API void tk_acc_skip(Acc *a, int64_t n) {
    a->events += n;
}

/* the code of a name (which 0) or cat (which 1) value of a block decoded elsewhere, given in
   order of first appearance: the dictionaries stay in order of first appearance over every
   event of the file; -1 when out of memory */
TK_API int32_t tk_acc_intern(Acc *a, int which, const uint8_t *s, int64_t n) {
    if (which < 0 || which > 1 || n < 0 || n > INT32_MAX) return -1;
    return dict_code(&a->dict[which], s, (size_t)n);
}

/* ------------------------------------------------------------------ module */

static PyObject *str_tuple(const char *const *keys) {
    Py_ssize_t n = 0;
    while (keys[n]) n++;
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(keys[i]);
        if (!s) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static int add_tables(PyObject *m) {
    PyObject *kinds = PyTuple_New(NCOMM);
    if (!kinds) return -1;
    for (Py_ssize_t i = 0; i < NCOMM; i++) {
        PyObject *v = PyLong_FromLong(COMM_KIND[i]);
        if (!v) { Py_DECREF(kinds); return -1; }
        PyTuple_SET_ITEM(kinds, i, v);
    }
    if (PyModule_AddObject(m, "COMM_KIND", kinds) < 0) { Py_DECREF(kinds); return -1; }
    const char *const *tables[] = {EVENT_KEYS, ID_KEYS, FLAG_KEYS};
    const char *names[] = {"EVENT_KEYS", "ID_KEYS", "FLAG_KEYS"};
    for (int i = 0; i < 3; i++) {
        PyObject *t = str_tuple(tables[i]);
        if (!t) return -1;
        if (PyModule_AddObject(m, names[i], t) < 0) { Py_DECREF(t); return -1; }
    }
    return 0;
}

static struct PyModuleDef accum_module = {
    PyModuleDef_HEAD_INIT, "_accum",
    "The native Kineto accumulator (called through ctypes; see tracekit.parsers.kineto.native).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__accum(void) {
    PyObject *m = PyModule_Create(&accum_module);
    if (!m) return NULL;
    if (add_tables(m) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
