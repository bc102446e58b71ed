/* The JSON keys the reader knows, declared once: the event keys, the id args and the args
   that flag an event (the communication keys first, in kineto_decode.COMM_FIELDS order, then
   the record_shapes and thread-name keys). The extension module exports these tables
   (EVENT_KEYS, ID_KEYS, FLAG_KEYS, COMM_KIND) and the Python side refuses a build whose
   tables differ from its msgspec decoder's fields (kineto_decode.Args). */
#ifndef TK_KEYS_H
#define TK_KEYS_H

static const char *const EVENT_KEYS[] = {"ph", "name", "cat", "pid", "tid", "ts", "dur",
                                         "args", NULL};
static const char *const ID_KEYS[] = {"External id", "correlation", "Python id",
                                      "Python parent id", NULL};
static const char *const FLAG_KEYS[] = {
    "Collective name", "dtype", "In msg nelems", "Out msg nelems", "In msg size",
    "Out msg size", "In split size", "Out split size", "Group size", "Process Group Name",
    "Process Group Description", "Process Group ID", "Process Group Ranks", "Rank",
    "Src Rank", "Dst Rank", "Seq", "Comms Id", "Global rank start", "Global rank stride",
    "Concrete Inputs", "Input type", "Input Dims", "name", NULL};

/* how each communication arg (the first NCOMM FLAG_KEYS) is read: a string, an int64, or
   the bits of a uint64 */
enum { COMM_STRING = 0, COMM_INT64 = 1, COMM_UINT64 = 2 };
#define NCOMM 20
static const int8_t COMM_KIND[NCOMM] = {0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 2,
                                        1, 1};

/* key -> its index in the table above, or -1 (a switch on the length, then compares) */
static int match_EVENT(P k, size_t n) {
    switch (n) {
    case 2:
        if (memcmp(k, "ph", 2) == 0) return 0;
        if (memcmp(k, "ts", 2) == 0) return 5;
        return -1;
    case 3:
        if (memcmp(k, "cat", 3) == 0) return 2;
        if (memcmp(k, "pid", 3) == 0) return 3;
        if (memcmp(k, "tid", 3) == 0) return 4;
        if (memcmp(k, "dur", 3) == 0) return 6;
        return -1;
    case 4:
        if (memcmp(k, "name", 4) == 0) return 1;
        if (memcmp(k, "args", 4) == 0) return 7;
        return -1;
    default:
        return -1;
    }
}
static int match_ID(P k, size_t n) {
    switch (n) {
    case 9:
        if (memcmp(k, "Python id", 9) == 0) return 2;
        return -1;
    case 11:
        if (memcmp(k, "External id", 11) == 0) return 0;
        if (memcmp(k, "correlation", 11) == 0) return 1;
        return -1;
    case 16:
        if (memcmp(k, "Python parent id", 16) == 0) return 3;
        return -1;
    default:
        return -1;
    }
}
static int match_FLAG(P k, size_t n) {
    switch (n) {
    case 3:
        if (memcmp(k, "Seq", 3) == 0) return 16;
        return -1;
    case 4:
        if (memcmp(k, "Rank", 4) == 0) return 13;
        if (memcmp(k, "name", 4) == 0) return 23;
        return -1;
    case 5:
        if (memcmp(k, "dtype", 5) == 0) return 1;
        return -1;
    case 8:
        if (memcmp(k, "Src Rank", 8) == 0) return 14;
        if (memcmp(k, "Dst Rank", 8) == 0) return 15;
        if (memcmp(k, "Comms Id", 8) == 0) return 17;
        return -1;
    case 10:
        if (memcmp(k, "Group size", 10) == 0) return 8;
        if (memcmp(k, "Input type", 10) == 0) return 21;
        if (memcmp(k, "Input Dims", 10) == 0) return 22;
        return -1;
    case 11:
        if (memcmp(k, "In msg size", 11) == 0) return 4;
        return -1;
    case 12:
        if (memcmp(k, "Out msg size", 12) == 0) return 5;
        return -1;
    case 13:
        if (memcmp(k, "In msg nelems", 13) == 0) return 2;
        if (memcmp(k, "In split size", 13) == 0) return 6;
        return -1;
    case 14:
        if (memcmp(k, "Out msg nelems", 14) == 0) return 3;
        if (memcmp(k, "Out split size", 14) == 0) return 7;
        return -1;
    case 15:
        if (memcmp(k, "Collective name", 15) == 0) return 0;
        if (memcmp(k, "Concrete Inputs", 15) == 0) return 20;
        return -1;
    case 16:
        if (memcmp(k, "Process Group ID", 16) == 0) return 11;
        return -1;
    case 17:
        if (memcmp(k, "Global rank start", 17) == 0) return 18;
        return -1;
    case 18:
        if (memcmp(k, "Process Group Name", 18) == 0) return 9;
        if (memcmp(k, "Global rank stride", 18) == 0) return 19;
        return -1;
    case 19:
        if (memcmp(k, "Process Group Ranks", 19) == 0) return 12;
        return -1;
    case 25:
        if (memcmp(k, "Process Group Description", 25) == 0) return 10;
        return -1;
    default:
        return -1;
    }
}

#endif
