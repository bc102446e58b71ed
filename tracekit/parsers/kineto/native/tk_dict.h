/* String dictionaries of the accumulator: the codes of ``name`` and ``cat`` values (and of
   communication strings) in order of first appearance, through an open-addressing hash
   table over the values' bytes.

   A block that fails is rolled back by truncating ``n`` and ``dlen``: a hash slot whose code
   is no longer below ``n`` reads as empty. That is safe because every live value was
   inserted before the rolled-back block began, when those slots were still empty, so no
   probe for a live value ever passed over them. */
#ifndef TK_DICT_H
#define TK_DICT_H
typedef struct {
    uint8_t *data;
    int32_t *off;     /* n + 1 */
    int32_t n, cap, dlen, dcap;
    int32_t *slots;   /* code + 1; 0: empty */
    int32_t nslots;
} Dict;


static uint32_t hash_bytes(P s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 1099511628211ULL;
        h ^= h >> 29;
    }
    if (i < n) { /* the last 1..7 bytes, as one word */
        uint64_t w = 0;
        if (n >= 8) {
            memcpy(&w, s + n - 8, 8);
            w >>= 8 * (8 - (n - i)); /* the bytes not hashed yet */
        } else {
            for (size_t k = 0; k < n; k++) w |= (uint64_t)s[k] << (8 * k);
        }
        h = (h ^ w ^ ((uint64_t)n << 56)) * 1099511628211ULL;
        h ^= h >> 29;
    }
    h ^= h >> 32;
    return (uint32_t)h;
}

static int dict_grow_slots(Dict *d) {
    int32_t ns;
    if (d->nslots > (1 << 28)) return -1;
    ns = d->nslots ? d->nslots * 2 : 1024;
    int32_t *slots = (int32_t *)calloc((size_t)ns, sizeof(int32_t));
    if (!slots) return -1;
    for (int32_t c = 0; c < d->n; c++) {
        P s = d->data + d->off[c];
        uint32_t h = hash_bytes(s, (size_t)(d->off[c + 1] - d->off[c])) & (uint32_t)(ns - 1);
        while (slots[h]) h = (h + 1) & (uint32_t)(ns - 1);
        slots[h] = c + 1;
    }
    free(d->slots);
    d->slots = slots;
    d->nslots = ns;
    return 0;
}

/* the code of the bytes [s, s + n), added when new; -1 when out of memory or too big */
static int32_t dict_code(Dict *d, P s, size_t n) {
    uint32_t h, mask;
    if (n > 0x3fffffff) return -1;
    if ((int64_t)(d->n + 1) * 2 > d->nslots && dict_grow_slots(d) < 0) return -1;
    mask = (uint32_t)(d->nslots - 1);
    h = hash_bytes(s, n) & mask;
    for (;;) {
        int32_t c = d->slots[h] - 1;
        if (c < 0 || c >= d->n) break; /* empty, or left by a rolled back block */
        if ((size_t)(d->off[c + 1] - d->off[c]) == n &&
            (n == 0 || memcmp(d->data + d->off[c], s, n) == 0))
            return c; /* (no memcmp / memcpy of 0 bytes: data may still be NULL) */
        h = (h + 1) & mask;
    }
    if (d->n + 2 > d->cap) {
        int32_t cap;
        if (d->cap > (1 << 28)) return -1;
        cap = d->cap ? d->cap * 2 : 1024;
        int32_t *off = (int32_t *)realloc(d->off, sizeof(int32_t) * (size_t)(cap + 1));
        if (!off) return -1;
        d->off = off;
        d->cap = cap;
        if (d->n == 0) d->off[0] = 0;
    }
    if ((int64_t)d->dlen + (int64_t)n > 0x7fffffff) return -1;
    if (d->dlen + (int32_t)n > d->dcap) {
        int64_t want = d->dcap ? (int64_t)d->dcap * 2 : 65536;
        uint8_t *data;
        while (want < (int64_t)d->dlen + (int64_t)n) want *= 2;
        if (want > 0x7fffffff) want = 0x7fffffff;
        data = (uint8_t *)realloc(d->data, (size_t)want);
        if (!data) return -1;
        d->data = data;
        d->dcap = (int32_t)want;
    }
    if (n) memcpy(d->data + d->dlen, s, n);
    d->dlen += (int32_t)n;
    d->off[d->n + 1] = d->dlen;
    d->slots[h] = d->n + 1;
    return d->n++;
}
#endif
