/* paddedcell.redactor._native: the views' gates as single C passes.
 *
 * Optional: when this module is missing (no compiler at install) or
 * PADDEDCELL_NATIVE=0, dumps.py and views.py run their Python/regex forms,
 * which define what these functions return (tests/test_redactor_native.py
 * checks equality, at every SIMD level). Plain C and the CPython API; x86
 * SIMD beyond SSE2 (AVX2, AVX-512) only in functions built for it
 * (GCC/clang target attributes) and called when the CPU has it. The GIL is
 * held, but for the gates' SIMD loop and strip_breaks' copy on a buffer of
 * 64 KiB or more (the pump filters 512 KiB batches in a worker thread).
 *
 * candidate_lines(buf, limit, chars_fullmatch) -> list[int] | None
 *     The starts of the lines of buf that fullmatch dumps._CANDIDATE (lines
 *     end at '\n' or at the end of buf), in order; None when more than limit.
 *     The first alternative is decided here; a line that fails it and starts
 *     with 4-16 hex digits and a space is passed to chars_fullmatch(buf,
 *     start, end) (the od -c/-a alternative, dumps._CHARS_LINE.fullmatch).
 *
 * percent_hits(buf, bytes32, pairs8192, triples, width[, grams, prime]) -> list[(s, e)] | None
 *     None when buf holds no '%'; else the %HH tokens (any case) whose byte
 *     is a pattern byte (bytes32: a 256-bit set) and that are triggers as
 *     views.PercentGate defines them: with the view bytes beside them, a
 *     pair of a pattern (pairs8192: a 65536-bit set, bit (a << 8) | b) and,
 *     when width > 2 and the token ends 4 bytes or more before the end, a
 *     triple (triples: sorted native uint32 (a << 16) | (b << 8) | c).
 *     With grams (gram_bits(patterns, prime)'s bitmap), also: inside eight
 *     view-consecutive bytes whose 8-gram's bit is set, or followed by fewer
 *     than seven view bytes (views.PercentGate: GRAMS_FROM).
 *
 * gates(buf, limit, chars_fullmatch, tables | None) -> (lines, hits)
 *     (candidate_lines(buf, limit, chars_fullmatch), percent_hits(buf,
 *     *tables), or None when tables is None) in one pass (views.Gates.scan);
 *     tables: the 4 or 6 arguments after buf.
 *
 * gates_for(limit_64k, chars_fullmatch, tables | None, buf) -> (lines, hits)
 *     gates(buf, limit_64k * (1 + len(buf) // 65536), chars_fullmatch, tables).
 *
 * strip_breaks(buf) -> bytes
 *     views.WrapView.view: buf less every '\r' and '\n' (buf itself when it is
 *     bytes without either).
 *
 * last_not_break(buf, end) -> int
 *     The last offset below end whose byte is no '\r' or '\n', or -1.
 *
 * dump_sync(buf, i, line_max) -> int
 *     dumps.DumpFinder.sync: where the scan buffer may start (a line break).
 *
 * gram_bits(patterns, prime) -> (bitmap, set)
 *     holds._Grams' filter: a bitmap of (prime + 7) // 8 bytes with bit
 *     r & 7 of byte r >> 3 set for r = g % prime of every 8-byte window g of
 *     every pattern (a native-order uint64, as int.from_bytes(w,
 *     sys.byteorder) reads it), and how many bits are set. The GIL is
 *     released for the pass (tens of millions of windows at k = 10 000).
 *
 * class_runs(spec, buf) -> int
 *     matcher.HyperscanMatcher's gates: bit j set when buf holds a run of at
 *     least run_j bytes of class j (j < 8). spec is bytes[256 + 32]: byte c
 *     the classes holding c (bit j), then run_j as 8 native int32 (0: the
 *     class is not asked). A run is found by looking at every run_j-th byte
 *     and walking back from one in the class: ~n / run_j loads when the
 *     class is rare in buf.
 *
 * gram_set(grams) -> table
 *     matcher.GramMatcher's table of distinct 8-byte grams: a blocked Bloom
 *     filter of 16-32 bits a gram (two bits of one 64-bit word, from two
 *     multiplicative hashes: ~2 % of other grams pass) and an
 *     open-addressed table of the grams (native uint64), load under 1/2.
 *
 * gram_find(table, stride, buf) -> list
 *     (i, i + 8) for every i in range(0, len(buf) - 7, stride) where
 *     buf[i:i + 8] is one of the table's grams (in order).
 *
 * lit_set(literals, stride) -> table
 *     matcher.SampledMatcher's table: for each literal (a tuple of distinct
 *     bytes of at least stride + 7 bytes each) its grams literal[o:o + 8],
 *     a <= o < a + stride (a: the literal's anchor, where its grams are
 *     rarest; see lit_anchors), hashed into buckets (an entry: literal, offset, 16-bit tag)
 *     behind a blocked Bloom filter as gram_set's.
 *
 * lit_find(table, literals, buf) -> list
 *     (s, s + len(lit)) for every occurrence of one of the literals in buf,
 *     each once: buf[i:i + 8] is looked up at i = 0, stride, 2 * stride ...
 *     only, and each entry of its gram compares its literal at i - offset.
 *
 * all_in(set32, buf, start) -> bool
 *     Every byte of buf[start:] is in set32 (a 256-bit set, bit c & 7 of
 *     byte c >> 3): not buf[start:].rstrip(the set's bytes).
 *
 * dump_partial(line_max, may_become, buf, start) -> bool
 *     dumps.may_become(buf[start:]) (with LINE_MAX = line_max) for a last
 *     line without '\n': most lines are turned away here, the others are
 *     passed to may_become.
 *
 * prefix_table(sorted_patterns, gram_bits, prime) -> table
 * prefix_hold(table, maxlen, buf) -> int
 *     holds.PrefixIndex.hold: the longest suffix of buf, of at most
 *     maxlen - 1 bytes, that is a prefix of one of the patterns (a sorted
 *     list of distinct non-empty bytes; gram_bits and prime: holds._Grams'
 *     filter of their 8-byte windows). See "the hold" below.
 *
 * leak_runs(buf, table, patterns, b64_min, hex_min) -> (base64 runs, hex runs, dump hint)
 * leak_hits(buf, table, patterns) -> [(pattern index, start)]
 * percent_decode(buf) -> bytes
 *     vault.leak's scans: the runs whose decodings may hold the admin password's
 *     class pattern, and the windows that are one. See "leak guard views" below.
 *
 * _set_simd(level) -> int
 *     For the tests: the gates and strip_breaks use at most this level (3
 *     AVX-512 BW+VBMI2, 2 AVX2, 1 SSE2, 0 none: memchr) and the level now in
 *     use is returned (at import: the best the CPU has).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* PADDEDCELL_NO_SIMD (a build flag, for checking the aarch64 path on x86): no SIMD at all. */
#if !defined(PADDEDCELL_NO_SIMD) && (defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2))
#include <emmintrin.h>
#define HAVE_SSE2 1
#if defined(_MSC_VER)
#include <intrin.h>
static inline int
ctz16(int m)
{
    unsigned long r;
    _BitScanForward(&r, (unsigned long)m);
    return (int)r;
}
#else
#define ctz16(m) __builtin_ctz((unsigned)(m))
#endif
#endif

/* 3: AVX-512 (BW, VBMI2), 2: AVX2, 1: SSE2, 0: scalar (the best the CPU has, or less: _set_simd). */
static int simd_level;

static signed char HEXVAL[256];   /* hex digit value, or -1 */
static unsigned char RUN[256];    /* [-0-9A-Fa-f :xX,] */

static void
init_tables(void)
{
    int c;
    for (c = 0; c < 256; c++) {
        HEXVAL[c] = -1;
        RUN[c] = 0;
    }
    for (c = '0'; c <= '9'; c++)
        HEXVAL[c] = (signed char)(c - '0');
    for (c = 'a'; c <= 'f'; c++)
        HEXVAL[c] = (signed char)(c - 'a' + 10);
    for (c = 'A'; c <= 'F'; c++)
        HEXVAL[c] = (signed char)(c - 'A' + 10);
    for (c = 0; c < 256; c++)
        if (HEXVAL[c] >= 0)
            RUN[c] = 1;
    RUN['-'] = RUN[' '] = RUN[':'] = RUN['x'] = RUN['X'] = RUN[','] = 1;
}

#define ISHEX(c) (HEXVAL[(unsigned char)(c)] >= 0)

#ifdef HAVE_SSE2
/* Bytes of v in [lo, hi], as a mask (signed compare after a shift of the range to -128). */
static inline __m128i
in_range(__m128i v, int lo, int hi)
{
    return _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((char)(128 - lo))),
                          _mm_set1_epi8((char)(-128 + (hi - lo + 1))));
}
#endif

/* -1 with a TypeError naming usage unless a call got want arguments, else 0. */
static int
wrong_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *usage)
{
    if (nargs == want)
        return 0;
    PyErr_SetString(PyExc_TypeError, usage);
    return -1;
}

/* *out = the integer o: 0, or -1 with an exception set. */
static int
as_ssize(PyObject *o, Py_ssize_t *out)
{
    *out = PyLong_AsSsize_t(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The first c in p[a:n] (or NULL): the next 16 bytes in one SSE2 compare, then
 * memchr (a call costs more than a short line: `yes` prints "y\n"). */
static inline const unsigned char *
find_byte(const unsigned char *p, Py_ssize_t a, Py_ssize_t n, unsigned char c)
{
#ifdef HAVE_SSE2
    if (a + 16 <= n) {
        int m = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + a)),
                                                 _mm_set1_epi8((char)c)));
        if (m)
            return p + a + ctz16(m);
        a += 16;
    }
#endif
    if (a >= n)
        return NULL;
    if (p[a] == c)
        return p + a;
    return memchr(p + a + 1, c, (size_t)(n - a - 1));
}

/* The end of the line p[a:e] less its trailing '\r's (e: its '\n', or n). */
static Py_ssize_t
line_content_end(const unsigned char *p, Py_ssize_t a, Py_ssize_t n)
{
    const unsigned char *nl = find_byte(p, a, n, '\n');
    Py_ssize_t m = nl == NULL ? n : nl - p;
    while (m > a && p[m - 1] == '\r')
        m--;
    return m;
}

/* 1: the class run of a candidate's first alternative stops at i (a byte
 * that is no '\n') and the line matches there: the rest is '\r's, or a
 * '|' ('>') whose line less its trailing '\r's ends with another '|' ('<'). */
static int
line_run_end(const unsigned char *p, Py_ssize_t i, Py_ssize_t n)
{
    Py_ssize_t j, m;
    if (p[i] == '\r') {
        for (j = i; j < n && p[j] == '\r'; j++)
            ;
        return j == n || p[j] == '\n';
    }
    if (p[i] != '|' && p[i] != '>')
        return 0;
    m = line_content_end(p, i, n);
    if (p[i] == '|')
        return m - 1 > i && p[m - 1] == '|';
    return p[m - 1] == '<';
}

/* 1: the line at a (it ends at the next '\n' or at n) fullmatches the first
 * alternative of _CANDIDATE with its '\r*':
 *     [ \t]*-?[0-9A-Fa-f][-0-9A-Fa-f :xX,]*(?: {2}.*|\|.*\||>.*<)?\r*
 * ('.' is any byte but '\n'). The class run takes no '\r', '\n', '|', '>':
 * with backtracking, the line matches when the run reaches the end of the
 * line less its trailing '\r's, or holds two adjacent spaces (' {2}.*' then
 * takes the rest), or stops at '|' ('>') and the line less its trailing
 * '\r's ends with another '|' ('<').
 * 2: it does not, but starts with 4-16 hex digits and a space (may match the
 * _CHARS alternative). 0: neither.
 * The line's end is looked for only after a '|', '>' or '\r' (none of the
 * bytes read before is a '\r' or '\n': they are all inside the line). */
static int
line_kind(const unsigned char *p, Py_ssize_t a, Py_ssize_t n)
{
    Py_ssize_t i = a, j;
    int space = 0;
#ifdef HAVE_SSE2
    /* A line that starts with a hex digit, 17 bytes or more before n (most
     * lines that get here): its first 16 bytes classified at once give the
     * run's end, a pair of spaces in it, and the hex digits at the start. */
    if (a + 17 <= n && ISHEX(p[a])) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + a)), low = _mm_or_si128(v, _mm_set1_epi8(0x20));
        __m128i sp = _mm_cmpeq_epi8(v, _mm_set1_epi8(' '));
        __m128i hex = _mm_or_si128(in_range(v, '0', '9'), in_range(low, 'a', 'f'));
        __m128i run = _mm_or_si128(_mm_or_si128(hex, _mm_cmpeq_epi8(v, _mm_set1_epi8(':'))),
                                   _mm_or_si128(_mm_or_si128(in_range(v, ',', '-'), sp),
                                                _mm_cmpeq_epi8(low, _mm_set1_epi8('x'))));
        unsigned r = (unsigned)_mm_movemask_epi8(run), sm = (unsigned)_mm_movemask_epi8(sp);
        unsigned h = (unsigned)_mm_movemask_epi8(hex);
        unsigned len = r == 0xFFFF ? 16 : (unsigned)ctz16(~r & 0xFFFF);
        if (sm & (sm << 1) & ((1u << len) - 1))
            return 1;
        if (len < 16) {  /* the run ends inside: decided here */
            i = a + len;
            if (p[i] == '\n')
                return 1;
            if (p[i] == '\r' || p[i] == '|' || p[i] == '>') {
                if (line_run_end(p, i, n))
                    return 1;
            }
            len = h == 0xFFFF ? 16 : (unsigned)ctz16(~h & 0xFFFF);  /* the hex digits at a */
            return (len >= 4 && p[a + len] == ' ') ? 2 : 0;
        }
        space = (int)(sm >> 15);
        i = a + 16;
        goto in_run;
    }
#endif
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i < n && p[i] == '-')
        i++;
    if (i < n && ISHEX(p[i])) {
        i++;
#ifdef HAVE_SSE2
    in_run:
#endif
        for (; i < n && RUN[p[i]]; i++) {
            if (p[i] == ' ') {
                if (space)
                    return 1;
                space = 1;
            }
            else
                space = 0;
        }
        if (i == n || p[i] == '\n' || line_run_end(p, i, n))
            return 1;
    }
    for (j = a; j < n && j - a < 17 && ISHEX(p[j]); j++)
        ;
    return (j - a >= 4 && j - a <= 16 && j < n && p[j] == ' ') ? 2 : 0;
}

/* ---- %HH triggers --------------------------------------------------- */

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
    const unsigned char *bytes32;
    const unsigned char *pairs;
    const uint32_t *triples;
    Py_ssize_t ntriples;
    Py_ssize_t width;
    const unsigned char *grams;  /* the patterns' 8-grams mod gram_prime (gram_bits), or NULL */
    uint64_t gram_prime;
} percent_ctx;

/* The byte of the %HH token at x, or -1 (no token there). */
static inline int
token_at(const percent_ctx *c, Py_ssize_t x)
{
    int h, l;
    if (x < 0 || x + 3 > c->n || c->p[x] != '%')
        return -1;
    h = HEXVAL[c->p[x + 1]];
    l = HEXVAL[c->p[x + 2]];
    if (h < 0 || l < 0)
        return -1;
    return (h << 4) | l;
}

static inline int
has_pair(const percent_ctx *c, int a, int b)
{
    unsigned v = ((unsigned)a << 8) | (unsigned)b;
    return (c->pairs[v >> 3] >> (v & 7)) & 1;
}

static int
has_triple(const percent_ctx *c, int a, int b, int d)
{
    uint32_t v = ((uint32_t)a << 16) | ((uint32_t)b << 8) | (uint32_t)d;
    Py_ssize_t lo = 0, hi = c->ntriples;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (c->triples[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->ntriples && c->triples[lo] == v;
}

/* views.PercentGate._in_triple: the token buf[s:s+3] (byte b) is inside three
 * view-consecutive bytes of a pattern (two view bytes each side looked at). */
static int
in_triple(const percent_ctx *c, Py_ssize_t s, int b)
{
    int seen[5], before[2], nb = 0, na = 0, k, i, j, total, lo, hi;
    Py_ssize_t at = s;
    for (k = 0; k < 2; k++) {
        int d = at >= 3 ? token_at(c, at - 3) : -1;
        if (d >= 0) {
            before[nb++] = d;
            at -= 3;
        }
        else if (at > 0) {
            before[nb++] = c->p[at - 1];
            at -= 1;
        }
    }
    for (i = 0; i < nb; i++)
        seen[i] = before[nb - 1 - i];
    seen[nb] = b;
    at = s + 3;
    for (k = 0; k < 2; k++) {
        int d = token_at(c, at);
        if (d >= 0) {
            seen[nb + 1 + na++] = d;
            at += 3;
        }
        else if (at < c->n) {
            seen[nb + 1 + na++] = c->p[at];
            at += 1;
        }
    }
    total = nb + 1 + na;
    i = nb;
    lo = i - 2 > 0 ? i - 2 : 0;
    hi = i < total - 3 ? i : total - 3;
    for (j = lo; j <= hi; j++)
        if (has_triple(c, seen[j], seen[j + 1], seen[j + 2]))
            return 1;
    return 0;
}

/* The token buf[s:s+3] (byte b) is inside an 8-view-byte window whose 8-gram
 * is set in c->grams (views.PercentGate: seven view bytes each side decoded),
 * or has fewer than seven view bytes after it (a pattern's prefix may end the
 * buffer there). Bounds: token_at checks its own; p[at - 1] only for at > 0,
 * p[at] only for at < n; seen holds at most 7 + 1 + 7 bytes and a window
 * j..j+7 has j <= nb, j + 8 <= nb + 8 = total. */
static int
in_gram(const percent_ctx *c, Py_ssize_t s, int b)
{
    unsigned char seen[15], before[7];
    int nb = 0, na = 0, k, j;
    Py_ssize_t at = s;
    for (k = 0; k < 7 && at > 0; k++) {
        int d = at >= 3 ? token_at(c, at - 3) : -1;
        if (d >= 0) {
            before[nb++] = (unsigned char)d;
            at -= 3;
        }
        else {
            before[nb++] = c->p[at - 1];
            at -= 1;
        }
    }
    for (k = 0; k < nb; k++)
        seen[k] = before[nb - 1 - k];
    seen[nb] = (unsigned char)b;
    at = s + 3;
    for (k = 0; k < 7 && at < c->n; k++) {
        int d = token_at(c, at);
        if (d >= 0) {
            seen[nb + 1 + na++] = (unsigned char)d;
            at += 3;
        }
        else {
            seen[nb + 1 + na++] = c->p[at];
            at += 1;
        }
    }
    if (na < 7)
        return 1;
    for (j = nb > 7 ? nb - 7 : 0; j <= nb; j++) {
        uint64_t g, r;
        memcpy(&g, seen + j, 8);
        r = g % c->gram_prime;
        if ((c->grams[r >> 3] >> (r & 7)) & 1)
            return 1;
    }
    return 0;
}

/* 1: the %HH token at s is a trigger (views.PercentGate.hits). */
static int
is_trigger(const percent_ctx *c, Py_ssize_t s)
{
    const unsigned char *p = c->p;
    Py_ssize_t e = s + 3, n = c->n;
    int b = token_at(c, s), x;
    if (!((c->bytes32[b >> 3] >> (b & 7)) & 1))
        return 0;
    if (c->width <= 1)
        return 1;
    /* the view bytes beside it: a %HH is a token; else the raw byte */
    x = s >= 3 ? token_at(c, s - 3) : -1;
    if (x < 0 && s >= 1)
        x = p[s - 1];
    if (!(x >= 0 && has_pair(c, x, b))) {
        x = token_at(c, e);
        if (x < 0 && e < n)
            x = p[e];
        if (!(x >= 0 && has_pair(c, b, x)))
            return 0;
    }
    /* both checks must pass; the grams first: their eight bitmap reads are
     * independent, the triples' binary search (1 MiB at k = 10 000) is a
     * chain of dependent cache misses, and ~5 % of random tokens pass them */
    if (c->grams != NULL && !in_gram(c, s, b))
        return 0;
    return !(c->width > 2 && e < n - 3 && !in_triple(c, s, b));
}

/* ---- one pass for both gates ----------------------------------------
 * Each 64-byte block is classified at once into bitmasks (bit j: byte j of
 * the block): '%', '\n', hex digits, START (a candidate line's first byte:
 * hex, ' ', '\t', '-') and SECOND (a superset of the bytes that can follow
 * it in a candidate: START, RUN, '|', '>', '\r', '\n'). A %HH token is a '%'
 * with hex bits at +1 and +2; a line worth line_kind is a line start (0, or
 * after a '\n') with START there and SECOND after (or the buffer's end).
 * Only those reach scalar code: on random text ~5 % of the '%' and ~8 % of
 * the lines, where visiting each '%' and each START line cost a
 * mispredicted branch or two (the cold cost was 2-3x the warm one).
 * Measured (64 KiB k=10, cold chunks): random text 23 -> 9 us, token log
 * 14.2 -> 10.6 us. The bytes after the buffer are taken as '\n's (no hex
 * digit, no START; SECOND). Classifiers: AVX-512BW and AVX2 (pshufb on the
 * nibbles: LO_TBL, HI_TBL), SSE2 (compares); without SSE2 the gates walk
 * with memchr instead (gate_pass_memchr). */

typedef struct {
    uint64_t pct, nl, hex, start, second;
} masks64;

/* The bits per byte of CLS[]: the classes as unions of them. */
#define C_DIGIT 0x01
#define C_HEXLETTER 0x02
#define C_SPACEDASH 0x04   /* ' ', '-' */
#define C_TAB 0x08
#define C_PCT 0x10
#define C_NL 0x20
#define C_MORE1 0x40       /* ':', 'X', 'x', '|', '>' (and '<', 'Z', '\\', '^', 'z', '~', '8') */
#define C_MORE2 0x80       /* ',', '\r' (and '\x0c', '-') */
#define C_HEX (C_DIGIT | C_HEXLETTER)
#define C_START (C_HEX | C_SPACEDASH | C_TAB)
#define C_SECOND (0xFF & ~C_PCT)

/* Each class bit k is a product set: high nibble in HI_SET[k], low nibble in
 * LO_SET[k] (so two 16-entry lookups and an AND classify a byte: pshufb). */
static const uint16_t HI_SET[8] = {1u << 3, (1u << 4) | (1u << 6), 1u << 2, 1u << 0, 1u << 2, 1u << 0,
                                   (1u << 3) | (1u << 5) | (1u << 7), (1u << 0) | (1u << 2)};
static const uint16_t LO_SET[8] = {0x03FF, 0x007E, (1u << 0) | (1u << 0xd), 1u << 9, 1u << 5, 1u << 0xa,
                                   (1u << 8) | (1u << 0xa) | (1u << 0xc) | (1u << 0xe), (1u << 0xc) | (1u << 0xd)};
static unsigned char LO_TBL[16], HI_TBL[16], CLS[256];

static void
init_classes(void)
{
    int k, x;
    for (x = 0; x < 16; x++)
        for (k = 0; k < 8; k++) {
            if ((LO_SET[k] >> x) & 1)
                LO_TBL[x] |= (unsigned char)(1 << k);
            if ((HI_SET[k] >> x) & 1)
                HI_TBL[x] |= (unsigned char)(1 << k);
        }
    for (x = 0; x < 256; x++)
        CLS[x] = LO_TBL[x & 15] & HI_TBL[x >> 4];
}

#ifdef HAVE_SSE2
/* The same masks with SSE2 compares (no pshufb); SECOND is looser here
 * (',' to '>' whole), which only lets a few more lines reach line_kind. */
static inline void
classify_sse2(const unsigned char *p, masks64 *m)
{
    int k;
    m->pct = m->nl = m->hex = m->start = m->second = 0;
    for (k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k)), low = _mm_or_si128(v, _mm_set1_epi8(0x20));
        __m128i nl = _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'));
        __m128i hex = _mm_or_si128(in_range(v, '0', '9'), in_range(low, 'a', 'f'));
        __m128i start = _mm_or_si128(_mm_or_si128(hex, _mm_cmpeq_epi8(v, _mm_set1_epi8(' '))),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')),
                                                  _mm_cmpeq_epi8(v, _mm_set1_epi8('-'))));
        __m128i second = _mm_or_si128(_mm_or_si128(start, nl), in_range(v, ',', '>'));
        second = _mm_or_si128(second, _mm_or_si128(_mm_cmpeq_epi8(low, _mm_set1_epi8('x')),
                                                   _mm_cmpeq_epi8(v, _mm_set1_epi8('|'))));
        second = _mm_or_si128(second, _mm_cmpeq_epi8(v, _mm_set1_epi8('\r')));
        m->pct |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('%'))) << (16 * k);
        m->nl |= (uint64_t)(unsigned)_mm_movemask_epi8(nl) << (16 * k);
        m->hex |= (uint64_t)(unsigned)_mm_movemask_epi8(hex) << (16 * k);
        m->start |= (uint64_t)(unsigned)_mm_movemask_epi8(start) << (16 * k);
        m->second |= (uint64_t)(unsigned)_mm_movemask_epi8(second) << (16 * k);
    }
}
#endif

#if defined(HAVE_SSE2) && defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_DISPATCH 1
/* The masks with AVX2: two pshufb lookups (LO_TBL, HI_TBL) classify 32 bytes. */
__attribute__((target("avx2,popcnt"))) static inline void
classify_avx2(const unsigned char *p, masks64 *m)
{
    const __m256i lo_tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)LO_TBL));
    const __m256i hi_tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)HI_TBL));
    const __m256i nib = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
    int k;
    m->pct = m->nl = m->hex = m->start = m->second = 0;
    for (k = 0; k < 2; k++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 * k));
        __m256i c = _mm256_and_si256(_mm256_shuffle_epi8(lo_tbl, _mm256_and_si256(v, nib)),
                                     _mm256_shuffle_epi8(hi_tbl, _mm256_and_si256(_mm256_srli_epi16(v, 4), nib)));
        int s = 32 * k;
        m->pct |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(c, 3)) << s;  /* bit 4 to 7 */
        m->nl |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(c, 2)) << s;   /* bit 5 to 7 */
        m->hex |= (uint64_t)(uint32_t)~_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(_mm256_and_si256(c, _mm256_set1_epi8(C_HEX)), zero)) << s;
        m->start |= (uint64_t)(uint32_t)~_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(_mm256_and_si256(c, _mm256_set1_epi8(C_START)), zero)) << s;
        m->second |= (uint64_t)(uint32_t)~_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(_mm256_and_si256(c, _mm256_set1_epi8((char)C_SECOND)), zero)) << s;
    }
}
#endif

#ifdef HAVE_AVX2_DISPATCH
#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt")))
/* The masks with AVX-512BW: the same lookups on 64 bytes, each class one test into a mask. */
T_AVX512 static inline void
classify_avx512(const unsigned char *p, masks64 *m)
{
    const __m512i lo_tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)LO_TBL));
    const __m512i hi_tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)HI_TBL));
    const __m512i nib = _mm512_set1_epi8(0x0f);
    __m512i v = _mm512_loadu_si512((const void *)p);
    __m512i c = _mm512_and_si512(_mm512_shuffle_epi8(lo_tbl, _mm512_and_si512(v, nib)),
                                 _mm512_shuffle_epi8(hi_tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib)));
    m->pct = _mm512_test_epi8_mask(c, _mm512_set1_epi8(C_PCT));
    m->nl = _mm512_test_epi8_mask(c, _mm512_set1_epi8(C_NL));
    m->hex = _mm512_test_epi8_mask(c, _mm512_set1_epi8(C_HEX));
    m->start = _mm512_test_epi8_mask(c, _mm512_set1_epi8(C_START));
    m->second = _mm512_test_epi8_mask(c, _mm512_set1_epi8((char)C_SECOND));
}
#endif

#if defined(_MSC_VER)
static inline int
ctz64(uint64_t m)
{
    unsigned long r;
    _BitScanForward64(&r, m);
    return (int)r;
}
#else
#define ctz64(m) __builtin_ctzll(m)
#endif
#if defined(_MSC_VER) && defined(_M_X64)
#define popcount64(m) ((int)__popcnt64(m))
#elif defined(_MSC_VER)
static inline int
popcount64(uint64_t m)
{
    int c = 0;
    for (; m; m &= m - 1)
        c++;
    return c;
}
#else
#define popcount64(m) __builtin_popcountll(m)
#endif

typedef struct {
    PyObject *buf;              /* the caller's object (for chars_fullmatch) */
    const unsigned char *p;
    Py_ssize_t n;
    int want_lines, want_pct, any_pct;
    Py_ssize_t limit, count;
    PyObject *fullmatch;
    PyObject *lines;            /* NULL once past the limit */
    percent_ctx pc;
    PyObject *hits;
} gate_scan;

/* The line at a is worth line_kind: append it if a candidate. -1 on error. */
static int
on_line(gate_scan *g, Py_ssize_t a)
{
    int kind = line_kind(g->p, a, g->n);
    PyObject *v;
    if (kind == 2) {
        const unsigned char *nl = find_byte(g->p, a, g->n, '\n');
        PyObject *r = PyObject_CallFunction(g->fullmatch, "Onn", g->buf, a, nl == NULL ? g->n : nl - g->p);
        if (r == NULL)
            return -1;
        kind = r != Py_None;
        Py_DECREF(r);
    }
    if (!kind)
        return 0;
    if (++g->count > g->limit) {
        Py_CLEAR(g->lines);
        return 0;
    }
    v = PyLong_FromSsize_t(a);
    if (v == NULL || PyList_Append(g->lines, v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    return 0;
}

/* The %HH token at s: append it if a trigger. -1 on error. */
static int
on_token(gate_scan *g, Py_ssize_t s)
{
    PyObject *t;
    if (!is_trigger(&g->pc, s))
        return 0;
    t = Py_BuildValue("(nn)", s, s + 3);
    if (t == NULL || PyList_Append(g->hits, t) < 0) {
        Py_XDECREF(t);
        return -1;
    }
    Py_DECREF(t);
    return 0;
}

/* Blocks a batch (64 KiB): the SIMD loop (no calls: its constants stay in
 * registers) keeps each block's token and line bits, then the handlers take
 * them. On a buffer of GIL_FREE_MIN bytes or more the SIMD loop runs without
 * the GIL (the pump filters 512 KiB batches in a worker thread). */
#define BATCH 1024
#define GIL_FREE_MIN 65536

/* The pass (see above) with one classifier; 0, or -1 on error.
 * The blocks at the buffer's end are classified from a padded copy in a
 * function of their own (one classifier call site in the loop). */
#define DEFINE_GATE_PASS(NAME, ATTR, CLASSIFY)                                                  \
    ATTR __attribute__((noinline)) static void NAME##_tail(const unsigned char *p, Py_ssize_t k, masks64 *m) \
    {                                                                                           \
        unsigned char tail[64];                                                                 \
        if (k <= 0) {                                                                           \
            m->pct = m->nl = m->hex = m->start = 0;                                             \
            m->second = ~(uint64_t)0;                                                           \
            return;                                                                             \
        }                                                                                       \
        memset(tail, '\n', 64);                                                                 \
        memcpy(tail, p, (size_t)k);                                                             \
        CLASSIFY(tail, m);                                                                      \
    }                                                                                           \
    ATTR static int NAME(gate_scan *g)                                                          \
    {                                                                                           \
        const unsigned char *p = g->p;                                                          \
        const Py_ssize_t n = g->n;                                                              \
        const int want_pct = g->want_pct;                                                       \
        uint64_t anyp = 0; /* a '%' seen */                                                     \
        Py_ssize_t a0;                                                                          \
        uint64_t toks[BATCH], lines[BATCH], nzt[BATCH / 64], nzl[BATCH / 64];                   \
        masks64 cur, next;                                                                      \
        uint64_t carry = 1; /* the block's first byte starts a line */                          \
        g->any_pct = 0;                                                                         \
        if (n <= 0 || (g->lines == NULL && !want_pct))                                          \
            return 0;                                                                           \
        if (n >= 64)                                                                            \
            CLASSIFY(p, &cur);                                                                  \
        else {                                                                                  \
            masks64 t_;                                                                         \
            NAME##_tail(p, n, &t_);                                                             \
            cur = t_;                                                                           \
        }                                                                                       \
        for (a0 = 0; a0 < n; a0 += 64 * BATCH) {                                                \
            uint64_t bits, w;                                                                   \
            int nb = 0, b, k;                                                                   \
            PyThreadState *ts_ = n >= GIL_FREE_MIN ? PyEval_SaveThread() : NULL;                \
            memset(nzt, 0, sizeof(nzt));                                                        \
            memset(nzl, 0, sizeof(nzl));                                                        \
            for (; nb < BATCH && a0 + 64 * nb < n; nb++) {                                      \
                Py_ssize_t a = a0 + 64 * nb;                                                    \
                if (a + 128 <= n)                                                               \
                    CLASSIFY(p + a + 64, &next);                                                \
                else {                                                                          \
                    masks64 t_;                                                                 \
                    NAME##_tail(p + a + 64, n - a - 64, &t_);                                   \
                    next = t_;                                                                  \
                }                                                                               \
                bits = cur.pct & ((cur.hex >> 1) | (next.hex << 63)) & ((cur.hex >> 2) | (next.hex << 62)); \
                toks[nb] = bits;                                                                \
                anyp |= cur.pct;                                                                \
                nzt[nb >> 6] |= (uint64_t)(bits != 0) << (nb & 63);                             \
                bits = ((cur.nl << 1) | carry) & cur.start & ((cur.second >> 1) | (next.second << 63)); \
                lines[nb] = bits;                                                               \
                nzl[nb >> 6] |= (uint64_t)(bits != 0) << (nb & 63);                             \
                carry = cur.nl >> 63;                                                           \
                cur = next;                                                                     \
            }                                                                                   \
            if (ts_ != NULL)                                                                    \
                PyEval_RestoreThread(ts_);                                                      \
            g->any_pct = want_pct && anyp != 0;                                                 \
            /* the blocks with bits, from the words of flags (no branch per empty block) */ \
            for (k = 0; want_pct && k < BATCH / 64; k++)                                        \
                for (w = nzt[k]; w; w &= w - 1) {                                               \
                    b = 64 * k + ctz64(w);                                                      \
                    for (bits = toks[b]; bits; bits &= bits - 1)                                \
                        if (on_token(g, a0 + 64 * b + ctz64(bits)) < 0)                         \
                            return -1;                                                          \
                }                                                                               \
            for (k = 0; g->lines != NULL && k < BATCH / 64; k++)                                \
                for (w = nzl[k]; w && g->lines != NULL; w &= w - 1) {                           \
                    b = 64 * k + ctz64(w);                                                      \
                    for (bits = lines[b]; bits && g->lines != NULL; bits &= bits - 1)           \
                        if (on_line(g, a0 + 64 * b + ctz64(bits)) < 0)                          \
                            return -1;                                                          \
                }                                                                               \
            if (g->lines == NULL && !want_pct)                                                  \
                break; /* past the limit */                                                     \
        }                                                                                       \
        return 0;                                                                               \
    }


/* The gates without SIMD (level 0; aarch64): memchr from line to line and
 * from '%' to '%' (glibc's memchr is vectorised there), the same handlers;
 * classifying blocks byte by byte cost ~5x this. */
static int
gate_pass_memchr(gate_scan *g)
{
    const unsigned char *p = g->p, *q;
    const Py_ssize_t n = g->n;
    Py_ssize_t a;
    g->any_pct = g->want_pct && n > 0 && memchr(p, '%', (size_t)n) != NULL;
    if (g->any_pct)
        for (q = memchr(p, '%', (size_t)n); q != NULL; q = memchr(q + 1, '%', (size_t)(p + n - q - 1))) {
            a = q - p;
            if (a + 3 <= n && ISHEX(p[a + 1]) && ISHEX(p[a + 2])) {
                if (on_token(g, a) < 0)
                    return -1;
                if (a + 3 >= n)
                    break;
                q += 2;  /* (a token holds no other '%') */
            }
            else if (a + 1 >= n)
                break;
        }
    for (a = 0; a < n && g->lines != NULL;) {
        if ((CLS[p[a]] & C_START) && (a + 1 == n || (CLS[p[a + 1]] & C_SECOND)) && on_line(g, a) < 0)
            return -1;
        q = memchr(p + a, '\n', (size_t)(n - a));
        if (q == NULL)
            break;
        a = q - p + 1;
    }
    return 0;
}
#ifdef HAVE_SSE2
DEFINE_GATE_PASS(gate_pass_sse2, , classify_sse2)
#endif
#ifdef HAVE_AVX2_DISPATCH
DEFINE_GATE_PASS(gate_pass_avx2, __attribute__((target("avx2,popcnt"))), classify_avx2)
DEFINE_GATE_PASS(gate_pass_avx512, T_AVX512, classify_avx512)
#endif


/* Run the pass over buf: g->lines (unless !want_lines) and g->hits (unless
 * !want_pct) filled; -1 with an exception set on error. */
static int
gate_run(gate_scan *g, PyObject *buf, Py_buffer *view, int want_lines, Py_ssize_t limit, PyObject *fullmatch,
         int want_pct, PyObject *const *tables, Py_ssize_t ntables)
{
    int r;
    memset(g, 0, sizeof(*g));
    g->buf = buf;
    g->p = (const unsigned char *)view->buf;
    g->n = view->len;
    g->want_lines = want_lines;
    g->want_pct = want_pct;
    g->limit = limit;
    g->fullmatch = fullmatch;
    if (want_lines && (g->lines = PyList_New(0)) == NULL)
        return -1;
    if (want_pct) {
        g->pc.p = g->p;
        g->pc.n = g->n;
        g->pc.bytes32 = (const unsigned char *)PyBytes_AS_STRING(tables[0]);
        g->pc.pairs = (const unsigned char *)PyBytes_AS_STRING(tables[1]);
        g->pc.triples = (const uint32_t *)PyBytes_AS_STRING(tables[2]);
        g->pc.ntriples = PyBytes_GET_SIZE(tables[2]) / 4;
        if (as_ssize(tables[3], &g->pc.width) < 0 || (g->hits = PyList_New(0)) == NULL) {
            Py_CLEAR(g->lines);
            return -1;
        }
        if (ntables == 6) {  /* check_tables: bytes of (prime + 7) // 8 or more, 1 <= prime <= 2^40 */
            g->pc.grams = (const unsigned char *)PyBytes_AS_STRING(tables[4]);
            g->pc.gram_prime = (uint64_t)PyLong_AsUnsignedLongLong(tables[5]);
        }
    }
#ifdef HAVE_AVX2_DISPATCH
    if (simd_level >= 3)
        r = gate_pass_avx512(g);
    else if (simd_level >= 2)
        r = gate_pass_avx2(g);
    else
#endif
#ifdef HAVE_SSE2
    if (simd_level >= 1)
        r = gate_pass_sse2(g);
    else
#endif
        r = gate_pass_memchr(g);
    if (r < 0) {
        Py_CLEAR(g->lines);
        Py_CLEAR(g->hits);
    }
    return r;
}

/* The percent tables (bytes32, pairs8192, triples, width[, grams, prime]: count 4
 * or 6) are of the right types; grams covers bit prime - 1, 1 <= prime <= 2^40. */
static int
check_tables(PyObject *const *t, Py_ssize_t count)
{
    if ((count == 4 || count == 6) && PyBytes_Check(t[0]) && PyBytes_GET_SIZE(t[0]) == 32 && PyBytes_Check(t[1])
        && PyBytes_GET_SIZE(t[1]) == 8192 && PyBytes_Check(t[2]) && PyBytes_GET_SIZE(t[2]) % 4 == 0) {
        unsigned long long prime;
        if (count == 4)
            return 0;
        if (PyBytes_Check(t[4]) && PyLong_Check(t[5])) {
            prime = PyLong_AsUnsignedLongLong(t[5]);
            if (prime == (unsigned long long)-1 && PyErr_Occurred())
                PyErr_Clear();
            else if (prime >= 1 && prime <= (1ull << 40)
                     && (unsigned long long)PyBytes_GET_SIZE(t[4]) >= (prime + 7) / 8)
                return 0;
        }
    }
    PyErr_SetString(PyExc_TypeError, "percent tables: (bytes32: bytes[32], pairs: bytes[8192], triples: bytes, "
                    "width[, grams: bytes[(prime + 7) // 8], prime])");
    return -1;
}

static PyObject *
candidate_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t limit;
    gate_scan g;

    if (wrong_nargs(nargs, 3, "candidate_lines(buf, limit, chars_fullmatch)") || as_ssize(args[1], &limit))
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (gate_run(&g, args[0], &view, 1, limit, args[2], 0, NULL, 0) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyBuffer_Release(&view);
    if (g.lines == NULL)
        Py_RETURN_NONE;
    return g.lines;
}

static PyObject *
percent_hits(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    gate_scan g;

    if (nargs != 7 && wrong_nargs(nargs, 5, "percent_hits(buf, bytes32, pairs, triples, width[, grams, prime])"))
        return NULL;
    if (check_tables(args + 1, nargs - 1))
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (gate_run(&g, args[0], &view, 0, 0, NULL, 1, args + 1, nargs - 1) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyBuffer_Release(&view);
    if (!g.any_pct) {
        Py_DECREF(g.hits);
        Py_RETURN_NONE;
    }
    return g.hits;
}

/* gates(buf, limit, ...) and gates_for(...): the pass over buf with these arguments. */
static PyObject *
gates_impl(PyObject *buf, Py_ssize_t limit, PyObject *fullmatch, PyObject *tables_obj)
{
    Py_buffer view;
    gate_scan g;
    PyObject *const *tables = NULL;
    Py_ssize_t ntables = 0;
    PyObject *lines, *hits;

    if (tables_obj != Py_None) {
        if (!PyTuple_Check(tables_obj) || (PyTuple_GET_SIZE(tables_obj) != 4 && PyTuple_GET_SIZE(tables_obj) != 6)) {
            PyErr_SetString(PyExc_TypeError, "gates: percent_tables is a 4- or 6-tuple or None");
            return NULL;
        }
        tables = &PyTuple_GET_ITEM(tables_obj, 0);
        ntables = PyTuple_GET_SIZE(tables_obj);
        if (check_tables(tables, ntables) < 0)
            return NULL;
    }
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (gate_run(&g, buf, &view, 1, limit, fullmatch, tables != NULL, tables, ntables) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyBuffer_Release(&view);
    lines = g.lines == NULL ? (Py_INCREF(Py_None), Py_None) : g.lines;
    if (tables == NULL || !g.any_pct) {
        Py_XDECREF(g.hits);
        hits = (Py_INCREF(Py_None), Py_None);
    }
    else
        hits = g.hits;
    return Py_BuildValue("(NN)", lines, hits);
}

/* gates(buf, limit, chars_fullmatch, percent_tables | None) -> (lines, hits) */
static PyObject *
gates(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t limit;

    if (wrong_nargs(nargs, 4, "gates(buf, limit, chars_fullmatch, percent_tables)") || as_ssize(args[1], &limit))
        return NULL;
    return gates_impl(args[0], limit, args[2], args[3]);
}

/* gates_for(limit_64k, chars_fullmatch, percent_tables | None, buf) -> (lines, hits):
 * gates() with limit = limit_64k per 64 KiB begun (views.Gates.scan as one call, the
 * buffer last: a functools.partial of the rest, no Python frame a feed). */
static PyObject *
gates_for(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t limit, n;

    if (wrong_nargs(nargs, 4, "gates_for(limit_64k, chars_fullmatch, percent_tables, buf)")
        || as_ssize(args[0], &limit))
        return NULL;
    if (PyBytes_Check(args[3]))
        n = PyBytes_GET_SIZE(args[3]);
    else if ((n = PyObject_Length(args[3])) < 0)
        return NULL;
    return gates_impl(args[3], limit * (1 + n / 65536), args[1], args[2]);
}

/* The best level this CPU runs: 2 AVX2, 1 SSE2, 0 neither. */
static int
best_simd(void)
{
#ifdef HAVE_AVX2_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi2"))
        return 3;
    if (__builtin_cpu_supports("avx2"))
        return 2;
#endif
#ifdef HAVE_SSE2
    return 1;
#else
    return 0;
#endif
}

/* _set_simd(level) -> int: the gates' pass uses at most this level (2 AVX2,
 * 1 SSE2, 0 scalar), and the level now in use is returned: for the tests,
 * which check each form on one machine. */
static PyObject *
set_simd(PyObject *self, PyObject *arg)
{
    long want = PyLong_AsLong(arg);
    int best = best_simd();
    if (want == -1 && PyErr_Occurred())
        return NULL;
    simd_level = want < best ? (int)(want < 0 ? 0 : want) : best;
    return PyLong_FromLong(simd_level);
}

/* ---- the line-break view ------------------------------------------- */



#ifdef HAVE_AVX2_DISPATCH
/* COMPRESS8[m]: the offsets of the set bits of m, then 0x80s (pshufb: a zero). */
static unsigned char COMPRESS8[256][8];

static void
init_compress(void)
{
    int m, j, k;
    for (m = 0; m < 256; m++) {
        for (j = 0, k = 0; j < 8; j++)
            if ((m >> j) & 1)
                COMPRESS8[m][k++] = (unsigned char)j;
        for (; k < 8; k++)
            COMPRESS8[m][k] = 0x80;
    }
}

/* strip_breaks' copy from i on with SSSE3 (the AVX2 level): each 16-byte
 * block's kept bytes gathered to the front of each half by one pshufb
 * (COMPRESS8 of each half's mask), the halves stored 8 bytes each; no branch
 * on where the breaks are. Returns the new w. w <= i: the stores stay inside
 * the n bytes of out. */
__attribute__((target("ssse3,popcnt"))) static Py_ssize_t
strip_ssse3(const unsigned char *p, unsigned char *o, Py_ssize_t i, Py_ssize_t w, Py_ssize_t n)
{
    const __m128i lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'), eight = _mm_set1_epi64x(0x0808080808080808LL);
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + i)), idx, c;
        unsigned keep = ~(unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
        unsigned lo = keep & 0xFF, hi = (keep >> 8) & 0xFF;
        idx = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)COMPRESS8[lo]),
                                 _mm_loadl_epi64((const __m128i *)COMPRESS8[hi]));
        c = _mm_shuffle_epi8(v, _mm_add_epi8(idx, _mm_and_si128(eight, _mm_set_epi64x(-1, 0))));
        _mm_storel_epi64((__m128i *)(o + w), c);
        _mm_storel_epi64((__m128i *)(o + w + _mm_popcnt_u32(lo)), _mm_srli_si128(c, 8));
        w += _mm_popcnt_u32(keep & 0xFFFF);  /* (one add a block on w's chain) */
    }
    for (; i < n; i++) {
        unsigned char b = p[i];
        o[w] = b;
        w += (b != '\n' && b != '\r');
    }
    return w;
}

/* strip_breaks' copy from i on with AVX-512 VBMI2: each 64-byte block's kept
 * bytes compressed in a register and stored whole (no branch on where the
 * breaks are: ordinary text has one every ~100 bytes); returns the new w.
 * w <= i: a 64-byte store at o + w stays inside the n bytes of out. */
T_AVX512 static Py_ssize_t
strip_avx512(const unsigned char *p, unsigned char *o, Py_ssize_t i, Py_ssize_t w, Py_ssize_t n)
{
    const __m512i lf = _mm512_set1_epi8('\n'), cr = _mm512_set1_epi8('\r');
    for (; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(p + i));
        __mmask64 keep = ~(_mm512_cmpeq_epi8_mask(v, lf) | _mm512_cmpeq_epi8_mask(v, cr));
        _mm512_storeu_si512((void *)(o + w), _mm512_maskz_compress_epi8(keep, v));
        w += _mm_popcnt_u64(keep);
    }
    if (i < n) {  /* the rest: a masked load and store */
        __mmask64 in = ((__mmask64)1 << (n - i)) - 1;
        __m512i v = _mm512_maskz_loadu_epi8(in, (const void *)(p + i));
        __mmask64 keep = in & ~(_mm512_cmpeq_epi8_mask(v, lf) | _mm512_cmpeq_epi8_mask(v, cr));
        __m512i c = _mm512_maskz_compress_epi8(keep, v);
        Py_ssize_t k = (Py_ssize_t)_mm_popcnt_u64(keep);
        _mm512_mask_storeu_epi8((void *)(o + w), ((__mmask64)1 << k) - 1, c);  /* k < 64 */
        w += k;
    }
    return w;
}
#endif

/* strip_breaks' copy: p[i:n] less its breaks to o + i (p[:i] has none, and is
 * there already); the new length. */
static Py_ssize_t
strip_from(const unsigned char *p, unsigned char *o, Py_ssize_t i, Py_ssize_t n)
{
    Py_ssize_t w = i;
#ifdef HAVE_AVX2_DISPATCH
    if (simd_level >= 3) {
        w = strip_avx512(p, o, i, w, n);
        i = n;
    }
    else if (simd_level >= 2) {
        w = strip_ssse3(p, o, i, w, n);
        i = n;
    }
#endif
#ifdef HAVE_SSE2
    {
        const __m128i lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
        /* w <= i: a 16-byte store at o + w stays inside the n bytes of out */
        for (; i + 16 <= n; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
            int k, m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
            if (!m) {
                _mm_storeu_si128((__m128i *)(o + w), v);
                w += 16;
                continue;
            }
            if (m == 0xFFFF)  /* breaks alone (`yes ''`, blank lines): nothing to keep */
                continue;
            if (m & (m - 1) & ((m & (m - 1)) - 1)) {  /* three breaks or more: byte by byte */
                for (k = 0; k < 16; k++) {
                    o[w] = p[i + k];
                    w += !((m >> k) & 1);
                }
                continue;
            }
            /* the block whole, then the piece after each break moved back over it */
            _mm_storeu_si128((__m128i *)(o + w), v);
            k = ctz16(m);
            w += k;
            for (m &= m - 1; m; m &= m - 1) {
                int next = ctz16(m);
                memcpy(o + w, p + i + k + 1, (size_t)(next - k - 1));
                w += next - k - 1;
                k = next;
            }
            memcpy(o + w, p + i + k + 1, (size_t)(15 - k));
            w += 15 - k;
        }
    }
#endif
    for (; i < n; i++) {
        unsigned char c = p[i];
        o[w] = c;
        w += (c != '\n' && c != '\r');
    }
    return w;
}

/* strip_breaks(buf: bytes) -> bytes: buf less every '\r' and '\n' (buf itself
 * when it holds none). From the first break on: AVX-512 VBMI2 (level 3)
 * or SSSE3 (level 2) compress every block without a branch on its breaks;
 * else SSE2: 16-byte blocks, a block without a break is copied whole
 * (ordinary text: one block in ~6 holds one, so that branch mispredicts). */
static PyObject *
strip_breaks(PyObject *self, PyObject *arg)
{
    const unsigned char *p;
    unsigned char *o;
    Py_ssize_t n, i = 0, w;
    PyObject *out;
    Py_buffer view;

    if (!PyBytes_CheckExact(arg)) {  /* another buffer: as bytes first */
        PyObject *b;
        if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
            return NULL;
        b = PyBytes_FromStringAndSize((const char *)view.buf, view.len);
        PyBuffer_Release(&view);
        if (b == NULL)
            return NULL;
        out = strip_breaks(self, b);
        Py_DECREF(b);
        return out;
    }
    p = (const unsigned char *)PyBytes_AS_STRING(arg);
    n = PyBytes_GET_SIZE(arg);
#ifdef HAVE_SSE2
    {
        const __m128i lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
        for (; i + 16 <= n; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
            if (_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr))))
                break;
        }
    }
#endif
    for (; i < n && p[i] != '\n' && p[i] != '\r'; i++)
        ;
    if (i == n) {
        Py_INCREF(arg);
        return arg;
    }
    out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL)
        return NULL;
    o = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(o, p, (size_t)i);
    if (n >= GIL_FREE_MIN) {  /* (out is no one else's yet; arg is bytes) */
        Py_BEGIN_ALLOW_THREADS
        w = strip_from(p, o, i, n);
        Py_END_ALLOW_THREADS
    }
    else
        w = strip_from(p, o, i, n);
    if (_PyBytes_Resize(&out, w) < 0)
        return NULL;
    return out;
}

/* last_not_break(buf, end) -> int: the last offset below end whose byte is
 * neither '\r' nor '\n', or -1 (views.Viewed._wrap_hold after a run of breaks;
 * Python's rstrip(b"\r\n") calls memchr per byte: ~2 ns a byte of `yes ''`). */
static PyObject *
last_not_break(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t end;
    const unsigned char *p;

    if (wrong_nargs(nargs, 2, "last_not_break(buf, end)") || as_ssize(args[1], &end))
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = (const unsigned char *)view.buf;
    if (end > view.len)
        end = view.len;
    if (end < 0)
        end = 0;
#ifdef HAVE_SSE2
    {
        const __m128i lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
        while (end >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + end - 16));
            int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
            if (m != 0xFFFF)
                break;  /* a byte that is no break in these 16: found below */
            end -= 16;
        }
    }
#endif
    while (end > 0 && (p[end - 1] == '\n' || p[end - 1] == '\r'))
        end--;
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(end - 1);
}

/* ---- the dump view's sync ------------------------------------------ */

/* The last '\n' in p[a:b], or -1. */
static Py_ssize_t
last_break(const unsigned char *p, Py_ssize_t a, Py_ssize_t b)
{
    while (b > a)
        if (p[--b] == '\n')
            return b;
    return -1;
}

/* dumps.DumpFinder.sync(buf, i) with LINE_MAX = line_max. */
static PyObject *
dump_sync(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t n, i, line_max, j, k;
    const unsigned char *p;

    if (wrong_nargs(nargs, 3, "dump_sync(buf, i, line_max)") || as_ssize(args[1], &i) || as_ssize(args[2], &line_max))
        return NULL;
    if (i < 0 || line_max < 0) {
        PyErr_SetString(PyExc_ValueError, "dump_sync: negative offset");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = (const unsigned char *)view.buf;
    n = view.len;
    j = last_break(p, i - line_max - 1 > 0 ? i - line_max - 1 : 0, i < n ? i : n);
    if (j < 0) {
        PyBuffer_Release(&view);
        return PyLong_FromSsize_t(i <= line_max + 1 ? 0 : i - line_max - 1);
    }
    for (;;) {
        /* the line after the break at j: a '*' line (less its '\r's) keeps the line before it */
        const unsigned char *nl = memchr(p + j + 1, '\n', (size_t)(n - j - 1));
        Py_ssize_t e = nl == NULL ? n : nl - p;
        while (e > j + 1 && p[e - 1] == '\r')
            e--;
        if (!(e == j + 2 && p[j + 1] == '*'))
            break;
        k = last_break(p, j - line_max - 1 > 0 ? j - line_max - 1 : 0, j);
        if (k < 0) {
            j = j <= line_max + 1 ? 0 : j;
            break;
        }
        j = k;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(j);
}

/* ---- the hold's gram filter ----------------------------------------- */

/* holds._Grams.of: one pass over every 8-byte window of every pattern. */
static PyObject *
gram_bits(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *seq, *bitmap, *out;
    Py_ssize_t count, i, j, prime, set = 0;
    unsigned char *bits;
    const char **starts;
    Py_ssize_t *lens;

    if (wrong_nargs(nargs, 2, "gram_bits(patterns, prime)") || as_ssize(args[1], &prime))
        return NULL;
    if (prime < 1 || (uint64_t)prime > ((uint64_t)1 << 40)) {
        PyErr_SetString(PyExc_ValueError, "gram_bits: prime out of range");
        return NULL;
    }
    seq = PySequence_Tuple(args[0]);  /* our own references: the pass runs without the GIL */
    if (seq == NULL)
        return NULL;
    count = PyTuple_GET_SIZE(seq);
    starts = PyMem_Malloc(sizeof(*starts) * (size_t)(count ? count : 1));
    lens = PyMem_Malloc(sizeof(*lens) * (size_t)(count ? count : 1));
    bitmap = PyBytes_FromStringAndSize(NULL, (prime + 7) / 8);
    if (starts == NULL || lens == NULL || bitmap == NULL) {
        PyMem_Free(starts);
        PyMem_Free(lens);
        Py_XDECREF(bitmap);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (i = 0; i < count; i++) {
        PyObject *p = PyTuple_GET_ITEM(seq, i);
        if (!PyBytes_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "gram_bits: patterns must be bytes");
            PyMem_Free(starts);
            PyMem_Free(lens);
            Py_DECREF(bitmap);
            Py_DECREF(seq);
            return NULL;
        }
        starts[i] = PyBytes_AS_STRING(p);
        lens[i] = PyBytes_GET_SIZE(p);
    }
    bits = (unsigned char *)PyBytes_AS_STRING(bitmap);
    memset(bits, 0, (size_t)((prime + 7) / 8));
    Py_BEGIN_ALLOW_THREADS
    {
        const uint64_t q = (uint64_t)prime;
        for (i = 0; i < count; i++) {
            const char *p = starts[i];
            for (j = 0; j + 8 <= lens[i]; j++) {
                uint64_t g, r;
                memcpy(&g, p + j, 8);
                r = g % q;
                if (!(bits[r >> 3] >> (r & 7) & 1)) {
                    bits[r >> 3] |= (unsigned char)(1u << (r & 7));
                    set++;
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(starts);
    PyMem_Free(lens);
    Py_DECREF(seq);
    out = Py_BuildValue("(Nn)", bitmap, set);
    return out;
}

/* ---- the literal groups' gates (matcher.HyperscanMatcher) ------------ */

/* Whether p[0:n] holds run bytes in a row whose class byte has bit set. */
static int
has_run(const unsigned char *p, Py_ssize_t n, const unsigned char *table, unsigned char bit, Py_ssize_t run)
{
    Py_ssize_t i = run - 1, j, lo;

    while (i < n) {
        if (!(table[p[i]] & bit)) {  /* no run of `run` holds byte i: the next one ends at i + run or later */
            i += run;
            continue;
        }
        lo = i - run + 1;
        for (j = i - 1; j >= lo && (table[p[j]] & bit); j--)
            ;
        if (j < lo)
            return 1;
        i = j + run;  /* byte j is out of the class: a run ends at j + run or later */
    }
    return 0;
}

/* class_runs(spec, buf) -> int: bit j set when buf holds a run of at least
 * run_j bytes of class j (see the module comment). */
static PyObject *
class_runs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    const unsigned char *table;
    int32_t runs[8];
    long mask = 0;
    int j;

    if (wrong_nargs(nargs, 2, "class_runs(spec, buf)"))
        return NULL;
    if (!PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != 256 + 32) {
        PyErr_SetString(PyExc_TypeError, "class_runs: spec is bytes[288]");
        return NULL;
    }
    table = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    memcpy(runs, table + 256, sizeof(runs));
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    for (j = 0; j < 8; j++)
        if (runs[j] > 0 && has_run((const unsigned char *)view.buf, view.len, table, (unsigned char)(1u << j), runs[j]))
            mask |= 1L << j;
    PyBuffer_Release(&view);
    return PyLong_FromLong(mask);
}

/* ---- 8-byte grams (matcher.GramMatcher) ------------------------------ */

/* Ask for a table's word before it is read (gram_find, lit_find: a batch's
 * filter words, then its passes' slots or buckets): their tables are MiBs to
 * hundreds of MiBs read at random, a cache miss each, and asked together the
 * misses overlap. A hint, no read (also the hold's, below). */
#if defined(__GNUC__)
#define PREFETCH(a) __builtin_prefetch((const void *)(a))
#else
#define PREFETCH(a) ((void)0)
#endif
/* Look-ups hashed, then tested, then probed together (gram_find: 8 KiB of stack;
 * lit_find: 6.5 KiB, a 4 KiB feed's look-ups at stride 25 in one batch). Measured
 * at k = 10 000 (in one process, 4 KiB feeds of random text, the tables cold:
 * 4 MiB swept between feeds), lit_find / gram_find us a feed: look-ups asked 8 /
 * 16 ahead (before) 3.7 / 4.9; batches of 32 2.7 / 3.5, 64 2.1 / 3.4, 256 1.9 /
 * 3.0, 512 1.7 / 2.7, 1024 1.8 / 2.8. A line repeated (the benchmark's
 * adversarial text: its few grams stay cached, no miss to overlap) pays for the
 * rounds: 1.0 / 1.5 before, 1.0 / 2.1 in batches (only h stored in the first). */
#ifndef GRAM_BATCH
#define GRAM_BATCH 512
#endif
#ifndef LIT_BATCH
#define LIT_BATCH 256
#endif

#define GRAM_MUL 0x9E3779B97F4A7C15ull
#define GRAM_MUL2 0xC2B2AE3D27D4EB4Full
#ifndef GRAM_FILTER_BITS
#define GRAM_FILTER_BITS 16  /* filter bits a gram (at least: the filter's size is a power of two) */
#endif
/* Bits set a gram, in one 64-bit word of the filter: gram_set's (a pass costs a
 * slot, in a table of a few MiB) and lit_set's (a bucket start and its entries,
 * in hundreds of MiB). Measured at k = 10 000 (micro.py, see GRAM_BATCH),
 * gram_find / lit_find us a 4 KiB feed with 2 and 3 bits: random text 2.8 / 1.7
 * and 2.9 / 1.5, the token log 2.5 / 1.6 and 2.7 / 1.5, the adversarial line
 * 1.75 / 1.0 and 2.1 / 1.0. */
#ifndef GRAM_FILTER_K
#define GRAM_FILTER_K 2
#endif
#ifndef LIT_FILTER_K
#define LIT_FILTER_K 3
#endif

/* The hash of an 8-byte gram (as an integer): h picks the filter word (its top
 * bits), gram_find's slot and lit_set's bucket; f the bits in that word
 * (filter_bits) and lit_set's tag. One for both tables (gram_set, lit_set). */
static inline void
gram_hash(uint64_t v, uint64_t *h, uint64_t *f)
{
    *h = v * GRAM_MUL;
    *f = (*h ^ (*h >> 31)) * GRAM_MUL2;
}

/* The k (2 or 3, a constant) bits of a gram's filter word (of f: bits 46-63; a tag takes 16-31). */
static inline uint64_t
filter_bits(uint64_t f, int k)
{
    uint64_t bits = (1ull << (f >> 58)) | (1ull << ((f >> 52) & 63));
    if (k >= 3)
        bits |= 1ull << ((f >> 46) & 63);
    return bits;
}

/* A batch's first round (gram_find, lit_find): hash up to max look-ups from
 * offset *i, stride apart (the h of gram_hash alone: few stores), and ask for
 * each one's filter word; returns how many, *i past the last. */
static inline int
hash_batch(const unsigned char *p, Py_ssize_t n, Py_ssize_t *i, Py_ssize_t stride,
           const uint64_t *words, uint32_t fs, uint64_t *hash, int max)
{
    int j;
    for (j = 0; j < max && *i + 8 <= n; j++, *i += stride) {
        uint64_t v;
        memcpy(&v, p + *i, 8);
        hash[j] = v * GRAM_MUL;
        PREFETCH(&words[hash[j] >> fs]);
    }
    return j;
}

/* Ask for 2 MiB pages under a table's memory (Linux; transparent huge pages in
 * "madvise" mode take only the ranges asked): its look-ups land at random in
 * MiBs (gram_set's) to hundreds of MiBs (lit_set's 221 MiB at k = 10 000), and
 * with 4 KiB pages each one is also a TLB miss, a page walk. Called before the
 * memory is first written (a page faulted in small stays small). A hint: no
 * effect where the kernel says no. */
#if defined(__linux__)
#include <sys/mman.h>
#endif
static void
huge_pages(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t page = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a)
        (void)madvise((void *)a, (size_t)(b - a), MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/* table layout: uint32 filter bits (log2), uint32 slot bits (log2), uint64 whether
 * the gram 0 is one (0 marks an empty slot), filter bytes, slots (uint64). */
struct gram_head {
    uint32_t fbits, sbits;
    uint64_t zero;
};

static PyObject *
gram_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *seq, *table;
    Py_ssize_t count, i;
    uint32_t fbits = 10, sbits = 4;
    struct gram_head head;
    unsigned char *filter;
    uint64_t *slots;
    char *base;

    if (wrong_nargs(nargs, 1, "gram_set(grams)"))
        return NULL;
    seq = PySequence_Tuple(args[0]);
    if (seq == NULL)
        return NULL;
    count = PyTuple_GET_SIZE(seq);
    while (((Py_ssize_t)1 << fbits) < GRAM_FILTER_BITS * count && fbits < 34)
        fbits++;
    while (((Py_ssize_t)1 << sbits) < 2 * count + 2 && sbits < 34)
        sbits++;
    table = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof(head) + ((size_t)1 << fbits) / 8
                                                       + sizeof(uint64_t) * ((size_t)1 << sbits)));
    if (table == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    base = PyBytes_AS_STRING(table);
    filter = (unsigned char *)base + sizeof(head);
    slots = (uint64_t *)(void *)(filter + ((size_t)1 << fbits) / 8);
    huge_pages(filter, ((size_t)1 << fbits) / 8 + sizeof(uint64_t) * ((size_t)1 << sbits));
    memset(filter, 0, ((size_t)1 << fbits) / 8);
    memset(slots, 0, sizeof(uint64_t) * ((size_t)1 << sbits));
    head.fbits = fbits;
    head.sbits = sbits;
    head.zero = 0;
    for (i = 0; i < count; i++) {
        PyObject *g = PyTuple_GET_ITEM(seq, i);
        uint64_t v, h, f;
        size_t k, mask = ((size_t)1 << sbits) - 1;
        if (!PyBytes_Check(g) || PyBytes_GET_SIZE(g) != 8) {
            PyErr_SetString(PyExc_TypeError, "gram_set: grams are bytes[8]");
            Py_DECREF(table);
            Py_DECREF(seq);
            return NULL;
        }
        memcpy(&v, PyBytes_AS_STRING(g), 8);
        gram_hash(v, &h, &f);
        ((uint64_t *)(void *)filter)[h >> (64 - (fbits - 6))] |= filter_bits(f, GRAM_FILTER_K);
        if (v == 0) {
            head.zero = 1;
            continue;
        }
        for (k = (size_t)(h >> (64 - sbits)); slots[k] != 0 && slots[k] != v; k = (k + 1) & mask)
            ;
        slots[k] = v;
    }
    memcpy(base, &head, sizeof(head));
    Py_DECREF(seq);
    return table;
}

static PyObject *
gram_find(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t stride, i, n;
    struct gram_head head;
    const unsigned char *filter, *p;
    const uint64_t *slots, *words;
    const char *base;
    PyObject *out;
    uint32_t fs, ss;
    size_t mask;

    if (wrong_nargs(nargs, 3, "gram_find(table, stride, buf)") || as_ssize(args[1], &stride))
        return NULL;
    if (!PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) < (Py_ssize_t)sizeof(head) || stride < 1) {
        PyErr_SetString(PyExc_TypeError, "gram_find: a gram_set table and a stride >= 1");
        return NULL;
    }
    base = PyBytes_AS_STRING(args[0]);
    memcpy(&head, base, sizeof(head));
    /* only gram_set's own layout: a table of another size would read past its end */
    if (head.fbits < 10 || head.fbits > 34 || head.sbits < 4 || head.sbits > 34
        || (size_t)PyBytes_GET_SIZE(args[0]) != sizeof(head) + ((size_t)1 << head.fbits) / 8
                                                 + sizeof(uint64_t) * ((size_t)1 << head.sbits)) {
        PyErr_SetString(PyExc_ValueError, "gram_find: not a gram_set table");
        return NULL;
    }
    filter = (const unsigned char *)base + sizeof(head);
    slots = (const uint64_t *)(const void *)(filter + ((size_t)1 << head.fbits) / 8);
    fs = 64 - (head.fbits - 6);
    ss = 64 - head.sbits;
    words = (const uint64_t *)(const void *)filter;
    mask = ((size_t)1 << head.sbits) - 1;
    out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    p = (const unsigned char *)view.buf;
    n = view.len;
    for (i = 0; i + 8 <= n;) {
        /* A batch in three rounds whose cache misses overlap: hash each look-up
         * and ask for its filter word; test the words (the passes' slots asked
         * for); probe the passes (most batches have none). */
        Py_ssize_t at[GRAM_BATCH], start = i;
        uint64_t hash[GRAM_BATCH];
        int count, passed = 0, j;
        count = hash_batch(p, n, &i, stride, words, fs, hash, GRAM_BATCH);
        for (j = 0; j < count; j++) {
            uint64_t h = hash[j], bits = filter_bits((h ^ (h >> 31)) * GRAM_MUL2, GRAM_FILTER_K);  /* gram_hash's f */
            if ((words[h >> fs] & bits) == bits) {  /* (passed <= j: kept in place) */
                at[passed] = start + j * stride;
                hash[passed] = h >> ss;  /* (the first slot, from here on) */
                PREFETCH(&slots[hash[passed]]);
                passed++;
            }
        }
        for (j = 0; j < passed; j++) {
            uint64_t v;
            size_t k;
            int hit = 0;
            memcpy(&v, p + at[j], 8);
            if (v == 0)
                hit = head.zero != 0;
            else
                for (k = (size_t)hash[j]; slots[k] != 0; k = (k + 1) & mask)
                    if (slots[k] == v) {
                        hit = 1;
                        break;
                    }
            if (hit) {
                PyObject *pair = Py_BuildValue("(nn)", at[j], at[j] + 8);
                if (pair == NULL || PyList_Append(out, pair) < 0) {
                    Py_XDECREF(pair);
                    PyBuffer_Release(&view);
                    Py_DECREF(out);
                    return NULL;
                }
                Py_DECREF(pair);
            }
        }
    }
    PyBuffer_Release(&view);
    return out;
}

/* ---- long literals by sampled grams (matcher.SampledMatcher) ----------- */

/* table layout: a lit_head, the filter (1 << fbits bits, as gram_set's), the
 * bucket starts (uint32[(1 << bbits) + 1], into the entries), the entries
 * (count lit_entry, bucket by bucket). An entry is one (literal, offset) whose
 * 8-byte gram hashes to that bucket; tag: 16 more bits of the gram's hash. */
struct lit_head {
    uint32_t fbits, bbits;
    uint64_t count, stride;
};
struct lit_entry {
    uint32_t lit;
    uint16_t off, tag;
};

static size_t
lit_size(uint32_t fbits, uint32_t bbits, uint64_t count)
{
    return sizeof(struct lit_head) + ((size_t)1 << fbits) / 8 + sizeof(uint32_t) * (((size_t)1 << bbits) + 1)
           + sizeof(struct lit_entry) * (size_t)count;
}

/* Each literal's anchor a (written to anchor[i]): the first offset, of those
 * with a + stride + 7 <= len and a + stride <= 65536 (an entry's offset is a
 * uint16), whose stride grams are the least common in all the literals (the
 * sum of their counts in a sketch: a saturating byte a hash bucket). Any a
 * keeps lit_find exact; a rare one keeps the literals that share a gram few
 * (every JWT starts with the same header: from offset 0 each of its grams
 * would be an entry of thousands of literals, all compared). -1: no memory. */
static int
lit_anchors(PyObject *seq, Py_ssize_t stride, uint16_t *anchor)
{
    Py_ssize_t n = PyTuple_GET_SIZE(seq), i, j;
    uint64_t total = 0;
    uint32_t kbits = 10;
    unsigned char *cnt;
    uint32_t *sums;
    Py_ssize_t longest = 0;

    for (i = 0; i < n; i++) {
        Py_ssize_t len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(seq, i));
        total += (uint64_t)(len - 7);
        if (len > longest)
            longest = len;
    }
    while (((uint64_t)1 << kbits) < total && kbits < 26)
        kbits++;
    cnt = PyMem_Calloc((size_t)1 << kbits, 1);
    sums = PyMem_Malloc(sizeof(uint32_t) * (size_t)(longest > 8 ? longest - 7 : 1));
    if (cnt == NULL || sums == NULL) {
        PyMem_Free(cnt);
        PyMem_Free(sums);
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *b = PyTuple_GET_ITEM(seq, i);
        const char *p = PyBytes_AS_STRING(b);
        Py_ssize_t len = PyBytes_GET_SIZE(b);
        for (j = 0; j + 8 <= len; j++) {
            uint64_t v;
            unsigned char *c;
            memcpy(&v, p + j, 8);
            c = &cnt[(v * GRAM_MUL) >> (64 - kbits)];
            if (*c < 255)
                (*c)++;
        }
    }
    for (i = 0; i < n; i++) {
        PyObject *b = PyTuple_GET_ITEM(seq, i);
        const char *p = PyBytes_AS_STRING(b);
        Py_ssize_t len = PyBytes_GET_SIZE(b), last = len - stride - 7, best = 0;
        uint32_t run = 0, low;
        if (last > 65536 - stride)
            last = 65536 - stride;
        for (j = 0; j + 8 <= len; j++) {
            uint64_t v;
            memcpy(&v, p + j, 8);
            sums[j] = cnt[(v * GRAM_MUL) >> (64 - kbits)];
        }
        for (j = 0; j < stride; j++)
            run += sums[j];
        low = run;
        for (j = 1; j <= last; j++) {  /* run: the sum over the grams at j .. j + stride - 1 */
            run += sums[j + stride - 1] - sums[j - 1];
            if (run < low) {
                low = run;
                best = j;
            }
        }
        anchor[i] = (uint16_t)best;
    }
    PyMem_Free(cnt);
    PyMem_Free(sums);
    return 0;
}

/* lit_set(literals, stride) -> table: the grams literal[o:o + 8], a <= o < a + stride,
 * of each literal (a tuple of distinct bytes, each of at least stride + 7 bytes;
 * a its anchor, see lit_anchors). */
static PyObject *
lit_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *seq, *table = NULL;
    Py_ssize_t n, i, stride;
    uint64_t count, e;
    uint32_t fbits = 10, bbits = 4, *starts, *fill = NULL;
    uint16_t *anchor;
    struct lit_head head;
    struct lit_entry *entries;
    uint64_t *words;
    char *base;

    if (wrong_nargs(nargs, 2, "lit_set(literals, stride)") || as_ssize(args[1], &stride))
        return NULL;
    if (!PyTuple_Check(args[0]) || stride < 1 || stride > 65535) {
        PyErr_SetString(PyExc_TypeError, "lit_set: a tuple of bytes and a stride in 1..65535");
        return NULL;
    }
    seq = args[0];
    n = PyTuple_GET_SIZE(seq);
    for (i = 0; i < n; i++) {
        PyObject *b = PyTuple_GET_ITEM(seq, i);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) < stride + 7) {
            PyErr_SetString(PyExc_TypeError, "lit_set: every literal is bytes of at least stride + 7");
            return NULL;
        }
    }
    count = (uint64_t)n * (uint64_t)stride;
    if (count >= ((uint64_t)1 << 32) || (uint64_t)n >= ((uint64_t)1 << 32)) {
        PyErr_SetString(PyExc_ValueError, "lit_set: too many grams");
        return NULL;
    }
    while (((uint64_t)1 << fbits) < GRAM_FILTER_BITS * count && fbits < 36)
        fbits++;
    while (((uint64_t)1 << bbits) < count && bbits < 32)
        bbits++;
    table = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)lit_size(fbits, bbits, count));
    if (table == NULL)
        return NULL;
    base = PyBytes_AS_STRING(table);
    words = (uint64_t *)(void *)(base + sizeof(head));
    starts = (uint32_t *)(void *)((char *)words + ((size_t)1 << fbits) / 8);
    entries = (struct lit_entry *)(void *)(starts + ((size_t)1 << bbits) + 1);
    huge_pages(words, lit_size(fbits, bbits, count) - sizeof(head));
    memset(words, 0, ((size_t)1 << fbits) / 8);
    memset(starts, 0, sizeof(uint32_t) * (((size_t)1 << bbits) + 1));
    head.fbits = fbits;
    head.bbits = bbits;
    head.count = count;
    head.stride = (uint64_t)stride;
    memcpy(base, &head, sizeof(head));
    fill = PyMem_Malloc(sizeof(uint32_t) * (((size_t)1 << bbits) + 1));
    anchor = PyMem_Malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    if (fill == NULL || anchor == NULL || lit_anchors(seq, stride, anchor) < 0) {
        PyMem_Free(fill);
        PyMem_Free(anchor);
        Py_DECREF(table);
        return PyErr_NoMemory();
    }
    /* two passes: count each bucket's entries (starts[b + 1]), then place them */
    for (i = 0; i < n; i++) {
        const char *p = PyBytes_AS_STRING(PyTuple_GET_ITEM(seq, i));
        Py_ssize_t o;
        for (o = anchor[i]; o < anchor[i] + stride; o++) {
            uint64_t v, h, f;
            memcpy(&v, p + o, 8);
            gram_hash(v, &h, &f);
            words[h >> (64 - (fbits - 6))] |= filter_bits(f, LIT_FILTER_K);
            starts[(h >> (64 - bbits)) + 1]++;
        }
    }
    for (e = 0; e < ((uint64_t)1 << bbits); e++)
        starts[e + 1] += starts[e];
    memcpy(fill, starts, sizeof(uint32_t) * (((size_t)1 << bbits) + 1));
    for (i = 0; i < n; i++) {
        const char *p = PyBytes_AS_STRING(PyTuple_GET_ITEM(seq, i));
        Py_ssize_t o;
        for (o = anchor[i]; o < anchor[i] + stride; o++) {
            uint64_t v, h, f;
            struct lit_entry *x;
            memcpy(&v, p + o, 8);
            gram_hash(v, &h, &f);
            x = &entries[fill[h >> (64 - bbits)]++];
            x->lit = (uint32_t)i;
            x->off = (uint16_t)o;
            x->tag = (uint16_t)(f >> 16);
        }
    }
    PyMem_Free(fill);
    PyMem_Free(anchor);
    return table;
}

/* lit_find(table, literals, buf) -> list: (s, s + len(lit)) for every
 * occurrence of one of the table's literals in buf (literals: the tuple
 * given to lit_set). Looks at i = 0, stride, 2 * stride ... only: an
 * occurrence at s (of at least stride + 7 bytes, anchor a) covers exactly one
 * such i in s + a .. s + a + stride - 1, and buf[i:i + 8] is its gram at
 * offset i - s. */
static PyObject *
lit_find(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t i, n, stride, nlits;
    struct lit_head head;
    const uint64_t *words;
    const uint32_t *starts;
    const struct lit_entry *entries;
    const unsigned char *p;
    const char *base;
    PyObject *out, *lits;
    uint32_t fs, bs;

    if (wrong_nargs(nargs, 3, "lit_find(table, literals, buf)"))
        return NULL;
    if (!PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) < (Py_ssize_t)sizeof(head) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "lit_find: a lit_set table and its tuple of literals");
        return NULL;
    }
    base = PyBytes_AS_STRING(args[0]);
    memcpy(&head, base, sizeof(head));
    /* only lit_set's own layout: a table of another size would read past its end */
    if (head.fbits < 10 || head.fbits > 36 || head.bbits < 4 || head.bbits > 32 || head.count >= ((uint64_t)1 << 32)
        || head.stride < 1 || head.stride > 65535
        || (size_t)PyBytes_GET_SIZE(args[0]) != lit_size(head.fbits, head.bbits, head.count)) {
        PyErr_SetString(PyExc_ValueError, "lit_find: not a lit_set table");
        return NULL;
    }
    lits = args[1];
    nlits = PyTuple_GET_SIZE(lits);
    stride = (Py_ssize_t)head.stride;
    words = (const uint64_t *)(const void *)(base + sizeof(head));
    starts = (const uint32_t *)(const void *)((const char *)words + ((size_t)1 << head.fbits) / 8);
    entries = (const struct lit_entry *)(const void *)(starts + ((size_t)1 << head.bbits) + 1);
    fs = 64 - (head.fbits - 6);
    bs = 64 - head.bbits;
    out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    p = (const unsigned char *)view.buf;
    n = view.len;
    for (i = 0; i + 8 <= n;) {
        /* A batch, in four rounds whose cache misses overlap: hash each look-up
         * and ask for its filter word; test the words (the passes' bucket
         * starts asked for); read the buckets (their entries asked for); the
         * entries (tag, then the literal compared). */
        Py_ssize_t at[LIT_BATCH], start = i;
        uint64_t hash[LIT_BATCH];
        uint32_t from[LIT_BATCH], to[LIT_BATCH];
        uint16_t tags[LIT_BATCH];
        int count, passed = 0, j;
        count = hash_batch(p, n, &i, stride, words, fs, hash, LIT_BATCH);
        for (j = 0; j < count; j++) {
            uint64_t h = hash[j], f = (h ^ (h >> 31)) * GRAM_MUL2, bits = filter_bits(f, LIT_FILTER_K);  /* gram_hash's f */
            if ((words[h >> fs] & bits) == bits) {  /* (passed <= j: kept in place) */
                at[passed] = start + j * stride;
                tags[passed] = (uint16_t)(f >> 16);
                from[passed] = (uint32_t)(h >> bs);  /* (the bucket, until the next round) */
                PREFETCH(&starts[from[passed]]);
                passed++;
            }
        }
        for (j = 0; j < passed; j++) {
            uint32_t bucket = from[j], end = starts[bucket + 1];
            if (end > head.count)  /* (never for lit_set's table: its starts end at count) */
                end = (uint32_t)head.count;
            from[j] = starts[bucket];
            to[j] = end;
            if (from[j] < end)
                PREFETCH(&entries[from[j]]);
        }
        for (j = 0; j < passed; j++) {
            uint32_t e;
            for (e = from[j]; e < to[j]; e++) {
                const struct lit_entry *x = &entries[e];
                PyObject *lit;
                Py_ssize_t s, len;
                if (x->tag != tags[j] || (Py_ssize_t)x->lit >= nlits)
                    continue;
                lit = PyTuple_GET_ITEM(lits, x->lit);
                if (!PyBytes_Check(lit))
                    continue;
                s = at[j] - (Py_ssize_t)x->off;
                len = PyBytes_GET_SIZE(lit);
                if (s < 0 || len > n - s || memcmp(p + s, PyBytes_AS_STRING(lit), (size_t)len) != 0)
                    continue;
                {
                    PyObject *pair = Py_BuildValue("(nn)", s, s + len);
                    if (pair == NULL || PyList_Append(out, pair) < 0) {
                        Py_XDECREF(pair);
                        PyBuffer_Release(&view);
                        Py_DECREF(out);
                        return NULL;
                    }
                    Py_DECREF(pair);
                }
            }
        }
    }
    PyBuffer_Release(&view);
    return out;
}

/* ---- the last line's quick tests (views.Viewed.scan_keep) ----------- */

/* all_in(set32, buf, start) -> bool: every byte of buf[start:] is in set32
 * (a 256-bit set): not buf[start:].rstrip(set), without its copy and its
 * memchr per byte (the line-break view's test of the last line, every feed). */
static PyObject *
all_in(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, i;
    const unsigned char *p, *set;

    if (wrong_nargs(nargs, 3, "all_in(set32, buf, start)") || as_ssize(args[2], &start))
        return NULL;
    if (!PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != 32) {
        PyErr_SetString(PyExc_TypeError, "all_in: set32 is bytes[32]");
        return NULL;
    }
    set = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = (const unsigned char *)view.buf;
    if (start < 0)
        start = 0;
    for (i = view.len; i > start; i--)
        if (!(set[p[i - 1] >> 3] >> (p[i - 1] & 7) & 1))
            break;
    PyBuffer_Release(&view);
    if (i > start)
        Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

/* dump_partial(line_max, may_become, buf, start) -> bool: dumps.may_become(buf[start:])
 * for a partial last line (no '\n' in it), with the tests that turn most
 * lines away made here, no slice: longer than LINE_MAX, a first byte no
 * dump line starts with, or (after the blanks) a byte before the first
 * ' ', '|' or '>' that none of its alternatives takes there ([-0-9A-Fa-fxX:,]:
 * an offset, groups, 0x items, decimal fields; a '*' line aside). Else the
 * regex decides: may_become is called on the slice. */
static PyObject *
dump_partial(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, n, line_max, a, e;
    const unsigned char *p;
    int maybe = 1;
    PyObject *part, *r;

    if (wrong_nargs(nargs, 4, "dump_partial(line_max, may_become, buf, start)") || as_ssize(args[3], &start)
        || as_ssize(args[0], &line_max))
        return NULL;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = (const unsigned char *)view.buf;
    n = view.len;
    if (start < 0 || start > n) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "dump_partial: start out of range");
        return NULL;
    }
    if (start == n || n - start > line_max)
        maybe = 0;  /* (may_become: an empty or too long line is not held) */
    else {
        e = n;
        while (e > start && p[e - 1] == '\r')
            e--;
        a = start;
        if (!(e - a == 1 && p[a] == '*')) {
            while (a < e && (p[a] == ' ' || p[a] == '\t'))
                a++;
            for (; a < e && p[a] != ' ' && p[a] != '|' && p[a] != '>'; a++)
                if (!(ISHEX(p[a]) || p[a] == '-' || p[a] == 'x' || p[a] == 'X' || p[a] == ':' || p[a] == ',')) {
                    maybe = 0;
                    break;
                }
        }
    }
    if (!maybe) {
        PyBuffer_Release(&view);
        Py_RETURN_FALSE;
    }
    part = PyBytes_FromStringAndSize((const char *)p + start, n - start);
    PyBuffer_Release(&view);
    if (part == NULL)
        return NULL;
    r = PyObject_CallOneArg(args[1], part);
    Py_DECREF(part);
    if (r == NULL)
        return NULL;
    maybe = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (maybe < 0)
        return NULL;
    return PyBool_FromLong(maybe);
}

/* ---- the hold: the longest held tail, whole ------------------------- */

/* holds.PrefixIndex.hold in one call, from a table built once per index
 * (prefix_table). The answer is the definition's, not the Python form's
 * steps: the longest suffix of buf, of at most maxlen - 1 bytes, that is a
 * prefix of some pattern. Every candidate is confirmed against the sorted
 * patterns (lower bound, then a compare), so the filters below only decide
 * which candidates are looked at:
 *
 * - a tail of 8 bytes or more has every byte in the patterns' alphabet
 *   (alpha) and every 8-byte window in the gram filter (holds._Grams: the
 *   same bitmap and prime); it starts with some pattern's first 8 bytes
 *   (heads: a blocked Bloom filter, two bits in one 64-byte block);
 * - a tail of 3 to 7 bytes is in a Bloom filter of the patterns' prefixes of
 *   those lengths; of 1 or 2 bytes, in an exact bitmap.
 *
 * The filters' blocks are prefetched together (a 4 KiB feed finds them cold
 * after the Hyperscan scan: one memory latency, not one each), and the
 * lower bound starts from the range of the tail's first two bytes. */

typedef struct {
    PyObject *patterns;           /* the sorted list (the pointers below point into it) */
    PyObject *gram_obj;           /* the gram filter's bytes */
    const unsigned char *grams;
    uint64_t prime;
    Py_ssize_t count;
    const unsigned char **ptr;
    Py_ssize_t *len;
    uint64_t *key;                /* the first 8 bytes, big-endian, zero-padded: the list's order */
    uint32_t *first2;             /* 65537 entries: the first pattern whose first two bytes are >= x */
    uint64_t *shortbloom, *headbloom;
    int short_shift, head_shift;  /* 64 - log2(blocks) */
    unsigned char alpha[32], p1[32];
    unsigned char *p2;            /* 8192 bytes */
    Py_ssize_t witness;
} prefix_tab;

#define PT_NAME "paddedcell.redactor._native.prefix_table"

static void
prefix_tab_release(prefix_tab *t)
{
    Py_XDECREF(t->patterns);
    Py_XDECREF(t->gram_obj);
    PyMem_Free(t->ptr);
    PyMem_Free(t->len);
    PyMem_Free(t->key);
    PyMem_Free(t->first2);
    PyMem_Free(t->shortbloom);
    PyMem_Free(t->headbloom);
    PyMem_Free(t->p2);
    PyMem_Free(t);
}

static void
prefix_tab_free(PyObject *capsule)
{
    prefix_tab *t = PyCapsule_GetPointer(capsule, PT_NAME);
    if (t != NULL)
        prefix_tab_release(t);
}

static inline uint64_t
load_be(const unsigned char *p, Py_ssize_t m)
{
    uint64_t k = 0;
    Py_ssize_t i;
    for (i = 0; i < 8; i++)
        k = (k << 8) | (i < m ? p[i] : 0);
    return k;
}

static inline uint64_t
mix64(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return x;
}

/* A blocked Bloom filter: 512-bit blocks, two bits per key in the block the hash's top bits pick. */
static inline const uint64_t *
bloom_block(const uint64_t *bloom, int shift, uint64_t h)
{
    return bloom + 8 * (shift >= 64 ? 0 : (h >> shift));
}

static inline int
bloom_has(const uint64_t *block, uint64_t h)
{
    unsigned a = (unsigned)(h & 511), b = (unsigned)((h >> 9) & 511);
    return (block[a >> 6] >> (a & 63) & 1) && (block[b >> 6] >> (b & 63) & 1);
}

static inline void
bloom_add(uint64_t *bloom, int shift, uint64_t h)
{
    uint64_t *block = bloom + 8 * (shift >= 64 ? 0 : (h >> shift));
    unsigned a = (unsigned)(h & 511), b = (unsigned)((h >> 9) & 511);
    block[a >> 6] |= (uint64_t)1 << (a & 63);
    block[b >> 6] |= (uint64_t)1 << (b & 63);
}

/* The key of a tail of 3-7 bytes (its length in the top byte). */
static inline uint64_t
short_key(const unsigned char *p, Py_ssize_t m)
{
    uint64_t k = (uint64_t)m << 56;
    Py_ssize_t i;
    for (i = 0; i < m; i++)
        k |= (uint64_t)p[i] << (8 * i);
    return mix64(k);
}

static inline uint64_t
head_key(const unsigned char *p)
{
    uint64_t k;
    memcpy(&k, p, 8);
    return mix64(k ^ 0x5bd1e9955bd1e995ull);
}

/* Blocks (a power of two) and shift for `entries` keys at ~16 bits each. */
static Py_ssize_t
bloom_blocks(Py_ssize_t entries, int *shift)
{
    Py_ssize_t blocks = 1;
    int lg = 0;
    while (blocks * 512 < entries * 16 && lg < 40) {
        blocks <<= 1;
        lg++;
    }
    *shift = 64 - lg;
    return blocks;
}

/* -1, 0, 1: pattern i against t[:m], in the list's order (bytes order). */
static inline int
pt_cmp(const prefix_tab *t, Py_ssize_t i, const unsigned char *s, Py_ssize_t m, uint64_t ks)
{
    Py_ssize_t a, c;
    int r;
    if (t->key[i] != ks)
        return t->key[i] < ks ? -1 : 1;
    a = t->len[i];
    c = a < m ? a : m;
    r = memcmp(t->ptr[i], s, (size_t)c);
    if (r)
        return r < 0 ? -1 : 1;
    return a < m ? -1 : a > m ? 1 : 0;
}

/* Whether s[:m] (m >= 1) is a prefix of some pattern (the last one that was is asked first). */
static int
pt_is_prefix(prefix_tab *t, const unsigned char *s, Py_ssize_t m)
{
    Py_ssize_t lo, hi, w = t->witness;
    uint64_t ks;
    if (w >= 0 && t->len[w] >= m && memcmp(t->ptr[w], s, (size_t)m) == 0)
        return 1;
    ks = load_be(s, m);
    if (m >= 2) {
        unsigned x = (unsigned)s[0] << 8 | s[1];
        lo = t->first2[x];
        hi = t->first2[x + 1];
    }
    else {
        lo = t->first2[(unsigned)s[0] << 8];
        hi = t->first2[((unsigned)s[0] + 1) << 8];
    }
    while (lo < hi) {  /* the first pattern >= s[:m] */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (pt_cmp(t, mid, s, m, ks) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->count && t->len[lo] >= m && memcmp(t->ptr[lo], s, (size_t)m) == 0) {
        t->witness = lo;
        return 1;
    }
    return 0;
}

static inline int
gram_has(const prefix_tab *t, const unsigned char *p)
{
    uint64_t g, r;
    memcpy(&g, p, 8);
    r = g % t->prime;
    return t->grams[r >> 3] >> (r & 7) & 1;
}

/* The longest held tail of at most top (<= 7) bytes. */
static Py_ssize_t
pt_short(prefix_tab *t, const unsigned char *p, Py_ssize_t n, Py_ssize_t top)
{
    uint64_t h[8];
    Py_ssize_t j;
    for (j = 3; j <= top; j++) {
        h[j] = short_key(p + n - j, j);
        PREFETCH(bloom_block(t->shortbloom, t->short_shift, h[j]));
    }
    for (j = top; j >= 3; j--)
        if (bloom_has(bloom_block(t->shortbloom, t->short_shift, h[j]), h[j]) && pt_is_prefix(t, p + n - j, j))
            return j;
    if (top >= 2) {
        unsigned x = (unsigned)p[n - 2] << 8 | p[n - 1];
        if (t->p2[x >> 3] >> (x & 7) & 1)
            return 2;
    }
    if (top >= 1 && t->p1[p[n - 1] >> 3] >> (p[n - 1] & 7) & 1)
        return 1;
    return 0;
}

/* A held tail of 8 bytes or more (top >= 8, n >= 8, the last 8 bytes in the gram filter), or 0. */
static Py_ssize_t
pt_long(prefix_tab *t, const unsigned char *p, Py_ssize_t n, Py_ssize_t top)
{
    Py_ssize_t lim = n - top, a = n, g, s;
    while (a > lim && (t->alpha[p[a - 1] >> 3] >> (p[a - 1] & 7) & 1))
        a--;
    if (n - a < 8)
        return 0;
    /* The run's own start first (a token after a space, a line start): most held long tails start there. */
    {
        uint64_t h = head_key(p + a);
        if (bloom_has(bloom_block(t->headbloom, t->head_shift, h), h) && pt_is_prefix(t, p + a, n - a))
            return n - a;
    }
    /* The windows back from the end while they pass the gram filter, 8 prefetched at a time. */
    g = n - 8;
    while (g > a) {
        uint64_t r[8];
        int k, c = (int)(g - a < 8 ? g - a : 8), stop = 0;
        for (k = 0; k < c; k++) {
            uint64_t w;
            memcpy(&w, p + g - 1 - k, 8);
            r[k] = w % t->prime;
            PREFETCH(t->grams + (r[k] >> 3));
        }
        for (k = 0; k < c; k++) {
            if (!(t->grams[r[k] >> 3] >> (r[k] & 7) & 1)) {
                stop = 1;
                break;
            }
            g--;
        }
        if (stop)
            break;
    }
    /* Candidates from the longest: a head, then confirmed. (a itself was asked above.) */
    for (s = g > a ? g : a + 1; s <= n - 8; s++) {
        uint64_t h = head_key(p + s);
        if (bloom_has(bloom_block(t->headbloom, t->head_shift, h), h) && pt_is_prefix(t, p + s, n - s))
            return n - s;
    }
    return 0;
}

/* prefix_hold(table, maxlen, buf) -> int */
static PyObject *
prefix_hold(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    prefix_tab *t;
    Py_ssize_t maxlen, top, n, h = 0;
    const unsigned char *p;

    Py_buffer view;
    int viewed = 0;

    if (wrong_nargs(nargs, 3, "prefix_hold(table, maxlen, buf)") || as_ssize(args[1], &maxlen))
        return NULL;
    t = PyCapsule_GetPointer(args[0], PT_NAME);
    if (t == NULL)
        return NULL;
    if (PyBytes_Check(args[2])) {
        p = (const unsigned char *)PyBytes_AS_STRING(args[2]);
        n = PyBytes_GET_SIZE(args[2]);
    }
    else {
        if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        viewed = 1;
        p = (const unsigned char *)view.buf;
        n = view.len;
    }
    top = maxlen - 1 < n ? maxlen - 1 : n;
    if (top > 0 && t->count > 0) {
        if (top >= 8 && gram_has(t, p + n - 8))
            h = pt_long(t, p, n, top);
        if (h == 0)
            h = pt_short(t, p, n, top < 7 ? top : 7);
    }
    if (viewed)
        PyBuffer_Release(&view);
    return PyLong_FromSsize_t(h);
}

/* prefix_table(sorted_patterns, gram_bits, prime) -> capsule (see above). */
static PyObject *
prefix_table(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *list, *capsule;
    prefix_tab *t;
    Py_ssize_t i, j, prime, shorts = 0, heads = 0, sblocks, hblocks;

    if (wrong_nargs(nargs, 3, "prefix_table(sorted_patterns, gram_bits, prime)") || as_ssize(args[2], &prime))
        return NULL;
    list = args[0];
    if (!PyList_Check(list) || !PyBytes_Check(args[1]) || prime < 1
        || PyBytes_GET_SIZE(args[1]) < (prime + 7) / 8) {
        PyErr_SetString(PyExc_TypeError, "prefix_table: (list of bytes, sorted; gram bitmap; its prime)");
        return NULL;
    }
    t = PyMem_Calloc(1, sizeof(*t));
    if (t == NULL)
        return PyErr_NoMemory();
    t->count = PyList_GET_SIZE(list);
    t->witness = -1;
    t->prime = (uint64_t)prime;
    t->ptr = PyMem_Malloc(sizeof(*t->ptr) * (size_t)(t->count + 1));
    t->len = PyMem_Malloc(sizeof(*t->len) * (size_t)(t->count + 1));
    t->key = PyMem_Malloc(sizeof(*t->key) * (size_t)(t->count + 1));
    t->first2 = PyMem_Malloc(sizeof(*t->first2) * 65537);
    t->p2 = PyMem_Calloc(8192, 1);
    capsule = NULL;
    if (t->ptr == NULL || t->len == NULL || t->key == NULL || t->first2 == NULL || t->p2 == NULL)
        goto nomem;
    Py_INCREF(list);
    t->patterns = list;
    Py_INCREF(args[1]);
    t->gram_obj = args[1];
    t->grams = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    for (i = 0; i < t->count; i++) {
        PyObject *o = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(o) || PyBytes_GET_SIZE(o) == 0) {
            PyErr_SetString(PyExc_TypeError, "prefix_table: patterns must be non-empty bytes");
            goto fail;
        }
        t->ptr[i] = (const unsigned char *)PyBytes_AS_STRING(o);
        t->len[i] = PyBytes_GET_SIZE(o);
        t->key[i] = load_be(t->ptr[i], t->len[i]);
        if (i > 0) {
            Py_ssize_t a = t->len[i - 1], b = t->len[i], c = a < b ? a : b;
            int r = memcmp(t->ptr[i - 1], t->ptr[i], (size_t)c);
            if (r > 0 || (r == 0 && a >= b)) {
                PyErr_SetString(PyExc_ValueError, "prefix_table: patterns must be sorted and distinct");
                goto fail;
            }
        }
        /* distinct prefixes of 3-7 bytes and heads: new where the previous pattern differs (sorted) */
        for (j = 3; j <= 7 && j <= t->len[i]; j++)
            if (i == 0 || t->len[i - 1] < j || memcmp(t->ptr[i - 1], t->ptr[i], (size_t)j) != 0)
                shorts++;
        if (t->len[i] >= 8 && (i == 0 || t->len[i - 1] < 8 || memcmp(t->ptr[i - 1], t->ptr[i], 8) != 0))
            heads++;
    }
    sblocks = bloom_blocks(shorts, &t->short_shift);
    hblocks = bloom_blocks(heads, &t->head_shift);
    t->shortbloom = PyMem_Calloc((size_t)sblocks * 8, sizeof(uint64_t));
    t->headbloom = PyMem_Calloc((size_t)hblocks * 8, sizeof(uint64_t));
    if (t->shortbloom == NULL || t->headbloom == NULL)
        goto nomem;
    {
        Py_ssize_t x = 0;
        for (i = 0; i < t->count; i++) {
            const unsigned char *q = t->ptr[i];
            Py_ssize_t m = t->len[i];
            unsigned f2 = (unsigned)q[0] << 8 | (m >= 2 ? q[1] : 0);
            while (x <= (Py_ssize_t)f2)
                t->first2[x++] = (uint32_t)i;
            t->p1[q[0] >> 3] |= (unsigned char)(1u << (q[0] & 7));
            if (m >= 2)
                t->p2[f2 >> 3] |= (unsigned char)(1u << (f2 & 7));
            for (j = 3; j <= 7 && j <= m; j++)
                bloom_add(t->shortbloom, t->short_shift, short_key(q, j));
            if (m >= 8) {
                bloom_add(t->headbloom, t->head_shift, head_key(q));
                for (j = 0; j < m; j++)
                    t->alpha[q[j] >> 3] |= (unsigned char)(1u << (q[j] & 7));
            }
        }
        while (x <= 65536)
            t->first2[x++] = (uint32_t)t->count;
    }
    capsule = PyCapsule_New(t, PT_NAME, prefix_tab_free);
    if (capsule == NULL)
        goto fail;
    return capsule;
nomem:
    PyErr_NoMemory();
fail:
    prefix_tab_release(t);  /* what is not allocated yet is NULL (the table was calloc'ed) */
    return NULL;
}

static PyObject *plain_ascii(PyObject *self, PyObject *arg);  /* (defined at the end) */

/* ---- leak guard views (vault.leak) ---------------------------------------------- */

/* leak_hits(buf, table, patterns) -> [(pattern index, start)]
 *
 * Every window of buf whose classes are one of the patterns: table (256 bytes of
 * '0'/'1') is the detector's secret split of the byte values, each pattern (a
 * tuple of bytes of '0'/'1') one form of the admin password written as classes;
 * vault.leak confirms each window by its digest. One pass for all the patterns: a
 * word of the last 64 classes is compared with each pattern's last 64 (or fewer),
 * and only a match is compared whole (a random window passes with probability
 * 2**-min(64, L)).
 *
 * leak_runs(buf, table, patterns, b64_min, hex_min) -> (b64_runs, hex_runs, dump_hint)
 *
 * The guard's decoded views (vault.leak._view_spans) without a Python step per
 * run: buf (bytes, no line breaks) is cut into maximal runs of base64 characters
 * (ASCII letters and digits, + / - _ =) of at least b64_min bytes and of hex
 * digits of at least hex_min; each run is decoded at each of its alignments
 * (base64: 4, skipping every '=', both alphabets; hex: 2) and searched for the
 * patterns. A run is returned, as (start, end), when one of its decodings holds
 * a pattern: the only runs the Python view must decode and confirm. The base64
 * decoding here emits every byte a2b_base64 would and maybe more (a2b stops at a
 * completed pad, or fails: then nothing), so no run with a hit is missed
 * (tests/test_leak_native.py checks both). dump_hint: whether buf looks like it
 * holds a hex dump's line (leak_scan).
 *
 * Both release the GIL: buf is immutable bytes, the patterns are held by the call. */

static signed char leak_b64_value[256];  /* 0..63, -2 for '=', -1 for the rest */
static signed char leak_hex_value[256];  /* 0..15, -1 for the rest */
/* bit 0 base64 character, bit 1 hex digit, bits 2-3 the dump hint's class (leak_scan) */
static unsigned char leak_byte_class[256];

static void
init_leak_tables(void)
{
    int b;
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (b = 0; b < 256; b++) {
        leak_b64_value[b] = -1;
        leak_hex_value[b] = -1;
    }
    for (b = 0; b < 64; b++)
        leak_b64_value[(unsigned char)alphabet[b]] = (signed char)b;
    leak_b64_value['-'] = 62;
    leak_b64_value['_'] = 63;
    leak_b64_value['='] = -2;
    for (b = 0; b < 10; b++)
        leak_hex_value['0' + b] = (signed char)b;
    for (b = 0; b < 6; b++) {
        leak_hex_value['a' + b] = (signed char)(10 + b);
        leak_hex_value['A' + b] = (signed char)(10 + b);
    }
    for (b = 0; b < 256; b++)
        leak_byte_class[b] = (unsigned char)((leak_b64_value[b] != -1)
                                             | (leak_hex_value[b] != -1) << 1
                                             | (leak_hex_value[b] != -1 ? 1 : b == ' ' ? 2 : b == ':' ? 3 : 0) << 2);
}

typedef struct {
    const unsigned char *pattern;  /* '0'/'1' */
    Py_ssize_t length;
    uint64_t tail, mask;           /* its last min(64, length) classes as bits */
} LeakPattern;

typedef struct {
    LeakPattern *patterns;
    Py_ssize_t count;
    const unsigned char *table;    /* byte -> '0'/'1' */
    unsigned char bit[256];        /* byte -> 0/1 */
} LeakSet;

/* set from (table, patterns): 0, or -1 with an exception set. The patterns point
 * into the tuple's bytes: the caller holds the tuple. */
static int
leak_set(LeakSet *set, PyObject *table, PyObject *tuple, const char *usage)
{
    Py_ssize_t k, j, m;
    if (!PyBytes_Check(table) || PyBytes_GET_SIZE(table) != 256 || !PyTuple_Check(tuple)) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    set->table = (const unsigned char *)PyBytes_AS_STRING(table);
    for (j = 0; j < 256; j++)
        set->bit[j] = set->table[j] == '1';
    set->count = PyTuple_GET_SIZE(tuple);
    set->patterns = PyMem_Calloc((size_t)(set->count ? set->count : 1), sizeof(LeakPattern));
    if (set->patterns == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (k = 0; k < set->count; k++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, k);
        LeakPattern *p = &set->patterns[k];
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) == 0) {
            PyErr_SetString(PyExc_TypeError, usage);
            PyMem_Free(set->patterns);
            return -1;
        }
        p->pattern = (const unsigned char *)PyBytes_AS_STRING(item);
        p->length = PyBytes_GET_SIZE(item);
        m = p->length < 64 ? p->length : 64;
        for (j = p->length - m; j < p->length; j++)
            p->tail = (p->tail << 1) | (uint64_t)(p->pattern[j] == '1');
        p->mask = m == 64 ? ~(uint64_t)0 : (((uint64_t)1 << m) - 1);
    }
    return 0;
}

/* The start of the next window of s[0:n] whose classes are a pattern, or -1. The
 * scan goes on from *at (the window's end, pattern *which + 1 on: two patterns may
 * end at the same byte) with the classes before it in *word; a new scan starts with
 * all three 0. On a hit, *which is the pattern's index. */
static Py_ssize_t
leak_next(const LeakSet *set, const unsigned char *s, Py_ssize_t n, Py_ssize_t *at,
          uint64_t *word, Py_ssize_t *which)
{
    const LeakPattern *patterns = set->patterns;
    Py_ssize_t i = *at, k = *which, j, count = set->count;
    uint64_t w = *word;
    if (k == 0 && i < n)
        w = (w << 1) | set->bit[s[i]];
    while (i < n) {
        for (; k < count; k++) {
            const LeakPattern *p = &patterns[k];
            if ((w & p->mask) != p->tail || i + 1 < p->length)
                continue;
            for (j = 0; j < p->length && set->table[s[i + 1 - p->length + j]] == p->pattern[j]; j++)
                ;
            if (j == p->length) {
                *at = i;
                *word = w;
                *which = k;
                return i + 1 - p->length;
            }
        }
        k = 0;
        if (++i < n)
            w = (w << 1) | set->bit[s[i]];
    }
    *at = n;
    *word = w;
    *which = 0;
    return -1;
}

static Py_ssize_t
leak_b64_decode(const unsigned char *s, Py_ssize_t n, unsigned char *out)
{
    Py_ssize_t i, o = 0;
    int quad = 0;
    unsigned int left = 0;
    for (i = 0; i < n; i++) {
        int v = leak_b64_value[s[i]];
        if (v < 0)
            continue;  /* '=' (a run holds nothing else) */
        switch (quad) {
        case 0: left = (unsigned)v; quad = 1; break;
        case 1: out[o++] = (unsigned char)((left << 2) | ((unsigned)v >> 4)); left = (unsigned)v & 15; quad = 2; break;
        case 2: out[o++] = (unsigned char)((left << 4) | ((unsigned)v >> 2)); left = (unsigned)v & 3; quad = 3; break;
        default: out[o++] = (unsigned char)((left << 6) | (unsigned)v); quad = 0; break;
        }
    }
    return o;
}

static Py_ssize_t
leak_hex_decode(const unsigned char *s, Py_ssize_t n, unsigned char *out)
{
    Py_ssize_t i, o = 0;
    for (i = 0; i + 1 < n; i += 2)
        out[o++] = (unsigned char)((leak_hex_value[s[i]] << 4) | leak_hex_value[s[i + 1]]);
    return o;
}

/* A growing array of integer pairs, filled without the GIL. */
typedef struct {
    Py_ssize_t *items;
    Py_ssize_t count, cap;
} LeakPairs;

static int
leak_push(LeakPairs *pairs, Py_ssize_t a, Py_ssize_t b)
{
    if (pairs->count == pairs->cap) {
        Py_ssize_t cap = pairs->cap ? 2 * pairs->cap : 16;
        Py_ssize_t *grown = PyMem_RawRealloc(pairs->items, (size_t)cap * 2 * sizeof(Py_ssize_t));
        if (grown == NULL)
            return -1;
        pairs->items = grown;
        pairs->cap = cap;
    }
    pairs->items[2 * pairs->count] = a;
    pairs->items[2 * pairs->count + 1] = b;
    pairs->count++;
    return 0;
}

/* The pairs as a list of 2-tuples (and freed), or NULL with an exception set. */
static PyObject *
leak_list(LeakPairs *pairs)
{
    PyObject *list = PyList_New(pairs->count);
    Py_ssize_t k;
    for (k = 0; list != NULL && k < pairs->count; k++) {
        PyObject *pair = Py_BuildValue("(nn)", pairs->items[2 * k], pairs->items[2 * k + 1]);
        if (pair == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, k, pair);
    }
    PyMem_RawFree(pairs->items);
    pairs->items = NULL;
    return list;
}

/* The run of one kind (0 base64, 1 hex) that starts at start: pushed as (start, end)
 * when one of its decodings holds a pattern. 0, or -1: no memory. */
static int
leak_run(const LeakSet *set, const unsigned char *buf, Py_ssize_t n, int kind, Py_ssize_t start,
         unsigned char *scratch, LeakPairs *found)
{
    const signed char *value = kind == 0 ? leak_b64_value : leak_hex_value;
    Py_ssize_t end = start, alignments = kind == 0 ? 4 : 2, a;
    while (end < n && value[buf[end]] != -1)
        end++;
    for (a = 0; a < alignments && a < end - start; a++) {
        Py_ssize_t m = kind == 0 ? leak_b64_decode(buf + start + a, end - start - a, scratch)
                                 : leak_hex_decode(buf + start + a, end - start - a, scratch);
        Py_ssize_t at = 0, which = 0;
        uint64_t word = 0;
        if (leak_next(set, scratch, m, &at, &word, &which) >= 0)
            return leak_push(found, start, end);
    }
    return 0;
}

/* One pass over buf: every base64 run of at least b64_min bytes and hex run of at least
 * hex_min goes through leak_run when its length reaches the minimum (a counter a kind,
 * reset without a branch: random text's short runs mispredicted a loop per run, 5 ms a
 * 512 KiB), and *dump_hint says whether buf looks like it holds a hex dump's line
 * (vault.leak._dump_hint: with hex digits as h, "hhhhhh: hh" or "hhhhhh  hh", an offset
 * column and its first pair, or " hh hh hh hh hh hh hh hh", eight spaced pairs; a rolling
 * word of 2-bit classes, 1 hex digit, 2 space, 3 ':', 0 the rest). -1: no memory. */
static int
leak_scan(const LeakSet *set, const unsigned char *buf, Py_ssize_t n, Py_ssize_t b64_min,
          Py_ssize_t hex_min, unsigned char *scratch, LeakPairs found[2], int *dump_hint)
{
    /* 10 classes: 1 1 1 1 1 1 3 2 1 1 and 1 1 1 1 1 1 2 2 1 1; 24: (2 1 1) x 8. Each starts
     * with a class that is not 0, so the word's first zeros never match. */
    const uint64_t colon = 0x555E5ull, spaces = 0x555A5ull, pairs = 0x965965965965ull;
    uint64_t word = 0;
    Py_ssize_t i, b64_len = 0, hex_len = 0;
    int hint = 0;
    if (b64_min < 1)
        b64_min = 1;
    if (hex_min < 1)
        hex_min = 1;
    for (i = 0; i < n; i++) {
        unsigned int c = leak_byte_class[buf[i]];
        b64_len = (b64_len + 1) & -(Py_ssize_t)(c & 1);
        hex_len = (hex_len + 1) & -(Py_ssize_t)((c >> 1) & 1);
        word = (word << 2) | (c >> 2);
        hint |= (word & 0xFFFFFull) == colon || (word & 0xFFFFFull) == spaces
                || (word & 0xFFFFFFFFFFFFull) == pairs;
        if (b64_len == b64_min && leak_run(set, buf, n, 0, i + 1 - b64_min, scratch, &found[0]) < 0)
            return -1;
        if (hex_len == hex_min && leak_run(set, buf, n, 1, i + 1 - hex_min, scratch, &found[1]) < 0)
            return -1;
    }
    *dump_hint = hint;
    return 0;
}

/* args[0:3] = (buf, table, patterns) of leak_hits and leak_runs: *set built and buf's
 * bytes, or -1 with a TypeError naming usage. */
static int
leak_args(PyObject *const *args, const char *usage, LeakSet *set, const unsigned char **buf,
          Py_ssize_t *n)
{
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    if (leak_set(set, args[1], args[2], usage) < 0)
        return -1;
    *buf = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    *n = PyBytes_GET_SIZE(args[0]);
    return 0;
}

static PyObject *
leak_hits(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char usage[] = "leak_hits(buf: bytes, table: bytes[256], patterns: tuple of non-empty bytes)";
    LeakSet set;
    LeakPairs found = {NULL, 0, 0};
    const unsigned char *buf;
    Py_ssize_t n, at = 0, which = 0, start;
    uint64_t word = 0;
    int failed = 0;

    if (wrong_nargs(nargs, 3, usage) || leak_args(args, usage, &set, &buf, &n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    while (!failed && (start = leak_next(&set, buf, n, &at, &word, &which)) >= 0) {
        failed = leak_push(&found, which, start) < 0;
        which++;  /* the next pattern ending at the same byte, then on */
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(set.patterns);
    if (failed) {
        PyMem_RawFree(found.items);
        return PyErr_NoMemory();
    }
    return leak_list(&found);
}

/* percent_decode(buf) -> bytes: every %XX (two hex digits, either case) as its byte,
 * left to right, the rest as it is (urllib.parse.unquote_to_bytes; re's
 * %[0-9a-fA-F]{2}): the guard's %XX view, decoded without a Python step per escape. */
static PyObject *
percent_decode(PyObject *self, PyObject *arg)
{
    const unsigned char *buf;
    unsigned char *out;
    Py_ssize_t n, i, o = 0;
    PyObject *result;

    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "percent_decode(buf: bytes)");
        return NULL;
    }
    buf = (const unsigned char *)PyBytes_AS_STRING(arg);
    n = PyBytes_GET_SIZE(arg);
    if ((result = PyBytes_FromStringAndSize(NULL, n)) == NULL)
        return NULL;
    out = (unsigned char *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < n; o++) {
        if (buf[i] == '%' && i + 2 < n && leak_hex_value[buf[i + 1]] >= 0
                && leak_hex_value[buf[i + 2]] >= 0) {
            out[o] = (unsigned char)((leak_hex_value[buf[i + 1]] << 4) | leak_hex_value[buf[i + 2]]);
            i += 3;
        } else {
            out[o] = buf[i++];
        }
    }
    Py_END_ALLOW_THREADS
    if (o < n && _PyBytes_Resize(&result, o) < 0)
        return NULL;
    return result;
}

static PyObject *
leak_runs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char usage[] = "leak_runs(buf: bytes, table: bytes[256], patterns: tuple of non-empty bytes, b64_min, hex_min)";
    LeakSet set;
    LeakPairs found[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
    const unsigned char *buf;
    unsigned char *scratch;
    Py_ssize_t n, b64_min, hex_min;
    PyObject *lists[2] = {NULL, NULL}, *result = NULL;
    int failed = 0, dump_hint = 0;

    if (wrong_nargs(nargs, 5, usage) || as_ssize(args[3], &b64_min) || as_ssize(args[4], &hex_min)
            || leak_args(args, usage, &set, &buf, &n) < 0)
        return NULL;
    if ((scratch = PyMem_RawMalloc((size_t)(n ? n : 1))) == NULL) {
        PyMem_Free(set.patterns);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    failed = leak_scan(&set, buf, n, b64_min, hex_min, scratch, found, &dump_hint) < 0;
    Py_END_ALLOW_THREADS
    PyMem_RawFree(scratch);
    PyMem_Free(set.patterns);
    if (failed) {
        PyMem_RawFree(found[0].items);
        PyMem_RawFree(found[1].items);
        return PyErr_NoMemory();
    }
    lists[0] = leak_list(&found[0]);
    lists[1] = leak_list(&found[1]);
    if (lists[0] != NULL && lists[1] != NULL)
        result = Py_BuildValue("(OOO)", lists[0], lists[1], dump_hint ? Py_True : Py_False);
    Py_XDECREF(lists[0]);
    Py_XDECREF(lists[1]);
    return result;
}

static PyMethodDef methods[] = {
    {"last_not_break", (PyCFunction)(void (*)(void))last_not_break, METH_FASTCALL,
     "last_not_break(buf, end) -> int (the last offset below end that is no \\r or \\n, or -1)"},
    {"strip_breaks", strip_breaks, METH_O, "strip_breaks(buf: bytes) -> bytes (buf less every \\r and \\n)"},
    {"dump_sync", (PyCFunction)(void (*)(void))dump_sync, METH_FASTCALL,
     "dump_sync(buf, i, line_max) -> int (dumps.DumpFinder.sync)"},
    {"candidate_lines", (PyCFunction)(void (*)(void))candidate_lines, METH_FASTCALL,
     "candidate_lines(buf, limit, chars_fullmatch) -> list[int] | None"},
    {"percent_hits", (PyCFunction)(void (*)(void))percent_hits, METH_FASTCALL,
     "percent_hits(buf, bytes32, pairs8192, triples, width[, grams, prime]) -> list[tuple[int, int]] | None"},
    {"gates", (PyCFunction)(void (*)(void))gates, METH_FASTCALL,
     "gates(buf, limit, chars_fullmatch, percent_tables | None) -> (candidate_lines(...), percent_hits(...) | None)"},
    {"gates_for", (PyCFunction)(void (*)(void))gates_for, METH_FASTCALL,
     "gates_for(limit_64k, chars_fullmatch, percent_tables | None, buf) -> gates(buf, limit_64k * (1 + len(buf) // 65536), ...)"},
    {"gram_bits", (PyCFunction)(void (*)(void))gram_bits, METH_FASTCALL,
     "gram_bits(patterns, prime) -> (bitmap, bits set) (holds._Grams' filter)"},
    {"class_runs", (PyCFunction)(void (*)(void))class_runs, METH_FASTCALL,
     "class_runs(spec, buf) -> int (bit j: buf holds a run of run_j bytes of class j)"},
    {"gram_set", (PyCFunction)(void (*)(void))gram_set, METH_FASTCALL,
     "gram_set(grams) -> table (distinct 8-byte grams, for gram_find)"},
    {"gram_find", (PyCFunction)(void (*)(void))gram_find, METH_FASTCALL,
     "gram_find(table, stride, buf) -> [(i, i + 8)] where buf[i:i + 8] is a gram, i in range(0, n - 7, stride)"},
    {"lit_set", (PyCFunction)(void (*)(void))lit_set, METH_FASTCALL,
     "lit_set(literals, stride) -> table (stride grams of each literal from its anchor, for lit_find)"},
    {"lit_find", (PyCFunction)(void (*)(void))lit_find, METH_FASTCALL,
     "lit_find(table, literals, buf) -> [(s, s + len(lit))] for every occurrence of a literal in buf"},
    {"all_in", (PyCFunction)(void (*)(void))all_in, METH_FASTCALL,
     "all_in(set32, buf, start) -> bool (every byte of buf[start:] is in the 256-bit set)"},
    {"dump_partial", (PyCFunction)(void (*)(void))dump_partial, METH_FASTCALL,
     "dump_partial(line_max, may_become, buf, start) -> bool (dumps.may_become(buf[start:]), most lines turned away in C)"},
    {"prefix_table", (PyCFunction)(void (*)(void))prefix_table, METH_FASTCALL,
     "prefix_table(sorted_patterns, gram_bits, prime) -> table (holds.PrefixIndex's hold in C)"},
    {"prefix_hold", (PyCFunction)(void (*)(void))prefix_hold, METH_FASTCALL,
     "prefix_hold(table, maxlen, buf) -> int (the longest suffix of buf, under maxlen bytes, that is a prefix of some pattern)"},
    {"_set_simd", set_simd, METH_O, "_set_simd(level) -> int (tests: the gates' pass at most AVX2 2, SSE2 1, scalar 0)"},
    {"plain_ascii", plain_ascii, METH_O,
     "plain_ascii(buf) -> bool (no byte of buf is >= 0x80 or ESC: OpenClaw's sanitizer leaves it as it is)"},
    {"leak_runs", (PyCFunction)(void (*)(void))leak_runs, METH_FASTCALL,
     "leak_runs(buf, table, patterns, b64_min, hex_min) -> (base64 runs, hex runs, dump hint): runs whose decodings may hold a pattern (vault.leak)"},
    {"percent_decode", percent_decode, METH_O,
     "percent_decode(buf) -> bytes: every %XX as its byte (urllib.parse.unquote_to_bytes; vault.leak)"},
    {"leak_hits", (PyCFunction)(void (*)(void))leak_hits, METH_FASTCALL,
     "leak_hits(buf, table, patterns) -> [(pattern index, start)] of every window whose classes are a pattern (vault.leak)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The redactor views' gates in C (optional; see paddedcell.redactor.dumps).", -1, methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    init_tables();
    init_classes();
    init_leak_tables();
#ifdef HAVE_AVX2_DISPATCH
    init_compress();
#endif
    simd_level = best_simd();
    return PyModule_Create(&module);
}

/* plain_ascii(buf) -> bool: no byte of buf (any buffer: the pump's read buffer, no copy)
 * is >= 0x80 or ESC (0x1b), so OpenClaw's sanitizer leaves it as it is
 * (paddedcell.execspec.ansi.OutputSanitizer's fast path): one pass, 64 bytes a step
 * with SSE2, where bytes.isascii plus a memchr for ESC were two passes over a copy.
 * With AVX2 128 bytes a step, with AVX-512BW 256 (simd_level, as the gates): the
 * bytes and their ESC compares are or-ed up and tested once a step. The rest of a
 * buffer (under a step) goes through the SSE2 and scalar loops. */
#ifdef HAVE_AVX2_DISPATCH
__attribute__((target("avx2"))) static Py_ssize_t
plain_avx2(const unsigned char *p, Py_ssize_t n, int *bad)
{
    const __m256i esc = _mm256_set1_epi8(0x1b), high = _mm256_set1_epi8((char)0x80);
    Py_ssize_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(p + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(p + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(p + i + 64));
        __m256i d = _mm256_loadu_si256((const __m256i *)(p + i + 96));
        __m256i e = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(a, esc), _mm256_cmpeq_epi8(b, esc)),
                                    _mm256_or_si256(_mm256_cmpeq_epi8(c, esc), _mm256_cmpeq_epi8(d, esc)));
        __m256i any = _mm256_or_si256(_mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d)), e);
        if (!_mm256_testz_si256(any, high)) {
            *bad = 1;
            break;
        }
    }
    return i;
}

__attribute__((target("avx512f,avx512bw"))) static Py_ssize_t
plain_avx512(const unsigned char *p, Py_ssize_t n, int *bad)
{
    const __m512i esc = _mm512_set1_epi8(0x1b), high = _mm512_set1_epi8((char)0x80);
    Py_ssize_t i = 0;
    for (; i + 256 <= n; i += 256) {
        __m512i a = _mm512_loadu_si512((const void *)(p + i));
        __m512i b = _mm512_loadu_si512((const void *)(p + i + 64));
        __m512i c = _mm512_loadu_si512((const void *)(p + i + 128));
        __m512i d = _mm512_loadu_si512((const void *)(p + i + 192));
        __mmask64 e = _mm512_cmpeq_epi8_mask(a, esc) | _mm512_cmpeq_epi8_mask(b, esc)
                    | _mm512_cmpeq_epi8_mask(c, esc) | _mm512_cmpeq_epi8_mask(d, esc);
        __m512i any = _mm512_or_si512(_mm512_or_si512(a, b), _mm512_or_si512(c, d));
        if (e | _mm512_test_epi8_mask(any, high)) {
            *bad = 1;
            break;
        }
    }
    return i;
}
#endif

static PyObject *
plain_ascii(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    const unsigned char *p;
    Py_ssize_t i = 0, n;
    int bad = 0;

    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = (const unsigned char *)view.buf;
    n = view.len;
#ifdef HAVE_AVX2_DISPATCH
    if (simd_level >= 3)
        i = plain_avx512(p, n, &bad);
    else if (simd_level >= 2)
        i = plain_avx2(p, n, &bad);
#endif
#ifdef HAVE_SSE2
    if (!bad) {
        const __m128i esc = _mm_set1_epi8(0x1b);
        for (; i + 64 <= n; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(p + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(p + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(p + i + 32));
            __m128i d = _mm_loadu_si128((const __m128i *)(p + i + 48));
            __m128i e = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(a, esc), _mm_cmpeq_epi8(b, esc)),
                                     _mm_or_si128(_mm_cmpeq_epi8(c, esc), _mm_cmpeq_epi8(d, esc)));
            /* the high bit of each byte: set in a byte >= 0x80, and in an ESC's compare */
            if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d)), e))) {
                bad = 1;
                break;
            }
        }
    }
#endif
    for (; i < n && !bad; i++)
        bad = (p[i] & 0x80u) || p[i] == 0x1b;
    PyBuffer_Release(&view);
    return PyBool_FromLong(!bad);
}
