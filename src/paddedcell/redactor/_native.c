/* paddedcell.redactor._native: the views' gates as single C passes.
 *
 * Optional: when this module is missing (no compiler at install) or
 * PADDEDCELL_NATIVE=0, dumps.py and views.py run their Python/regex forms,
 * which define what these functions return (tests/test_redactor_native.py
 * checks equality). Plain C and the CPython API only; the GIL is held
 * (each call is a few microseconds a 64 KiB buffer).
 *
 * candidate_lines(buf, limit, chars_fullmatch) -> list[int] | None
 *     The starts of the lines of buf that fullmatch dumps._CANDIDATE (lines
 *     end at '\n' or at the end of buf), in order; None when more than limit.
 *     The first alternative is decided here; a line that fails it and starts
 *     with 4-16 hex digits and a space is passed to chars_fullmatch(buf,
 *     start, end) (the od -c/-a alternative, dumps._CHARS_LINE.fullmatch).
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
 * percent_hits(buf, bytes32, pairs8192, triples, width) -> list[(s, e)] | None
 *     None when buf holds no '%'; else the %HH tokens (any case) whose byte
 *     is a pattern byte (bytes32: a 256-bit set) and that are triggers as
 *     views.PercentGate defines them: with the view bytes beside them, a
 *     pair of a pattern (pairs8192: a 65536-bit set, bit (a << 8) | b) and,
 *     when width > 2 and the token ends 4 bytes or more before the end, a
 *     triple (triples: sorted native uint32 (a << 16) | (b << 8) | c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
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

/* 1: the line p[0:len] (no '\n') fullmatches the first alternative of
 * _CANDIDATE with its '\r*':
 *     [ \t]*-?[0-9A-Fa-f][-0-9A-Fa-f :xX,]*(?: {2}.*|\|.*\||>.*<)?\r*
 * ('.' is any byte but '\n'). The class run takes no '\r', '|', '>': with
 * backtracking, the line matches when the run reaches the end of the line
 * less its trailing '\r's, or holds two adjacent spaces (' {2}.*' then takes
 * the rest), or stops at '|' ('>') and the line less its trailing '\r's ends
 * with another '|' ('<').
 * 2: it does not, but starts with 4-16 hex digits and a space (may match the
 * _CHARS alternative). 0: neither. */
static int
line_kind(const unsigned char *p, Py_ssize_t len)
{
    Py_ssize_t m = len, i = 0, j;
    while (m > 0 && p[m - 1] == '\r')
        m--;
    while (i < m && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i < m && p[i] == '-')
        i++;
    if (i < m && ISHEX(p[i])) {
        int space = 0;
        for (i++; i < m && RUN[p[i]]; i++) {
            if (p[i] == ' ') {
                if (space)
                    return 1;
                space = 1;
            }
            else
                space = 0;
        }
        if (i == m)
            return 1;
        if (p[i] == '|' && m - 1 > i && p[m - 1] == '|')
            return 1;
        if (p[i] == '>' && p[m - 1] == '<')
            return 1;
    }
    for (j = 0; j < m && j < 17 && ISHEX(p[j]); j++)
        ;
    return (j >= 4 && j <= 16 && j < m && p[j] == ' ') ? 2 : 0;
}

/* The first c in p[a:n] (or NULL): the next 16 bytes in one SSE2 compare, then
 * memchr (a call costs more than a short line: `yes` prints "y\n"). Looking at
 * them one by one first cost ordinary text (a line or '%' every ~100 bytes) ~2x. */
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

/* A line can be a candidate only if its first byte is one of these. */
static unsigned char START[256];

#ifdef HAVE_SSE2
/* Bytes of v in [lo, hi], as a mask (signed compare after a shift of the range to -128). */
static inline __m128i
in_range(__m128i v, int lo, int hi)
{
    return _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((char)(128 - lo))),
                          _mm_set1_epi8((char)(-128 + (hi - lo + 1))));
}

/* START[] of each byte of v: hex digits, ' ', '\t', '-'. */
static inline int
start_mask(__m128i v)
{
    __m128i m = _mm_or_si128(in_range(v, '0', '9'), in_range(_mm_or_si128(v, _mm_set1_epi8(0x20)), 'a', 'f'));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(' ')));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('\t')));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('-')));
    return _mm_movemask_epi8(m);
}
#endif

/* The start of the first line after the '\n' at or after a whose first byte
 * is in START, or -1. SSE2: each 16-byte block's breaks and the bytes after
 * them at once (dense short lines: `yes`, blank lines), memchr over a block
 * without a break (ordinary text). */
static Py_ssize_t
next_start(const unsigned char *p, Py_ssize_t a, Py_ssize_t n)
{
#ifdef HAVE_SSE2
    const __m128i lf = _mm_set1_epi8('\n');
    while (a + 17 <= n) {
        int nl = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + a)), lf));
        if (nl == 0) {
            const unsigned char *q = memchr(p + a + 16, '\n', (size_t)(n - a - 16));
            if (q == NULL)
                return -1;
            a = q - p;
            continue;
        }
        nl &= start_mask(_mm_loadu_si128((const __m128i *)(p + a + 1)));
        if (nl)
            return a + ctz16(nl) + 1;
        a += 16;
    }
#endif
    for (;;) {
        const unsigned char *q = a < n ? memchr(p + a, '\n', (size_t)(n - a)) : NULL;
        if (q == NULL || q + 1 >= p + n)
            return -1;
        a = q - p + 1;
        if (START[p[a]])
            return a;
    }
}

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

static PyObject *
candidate_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t limit, n, a, count = 0;
    PyObject *fullmatch, *out;
    const unsigned char *p;

    if (wrong_nargs(nargs, 3, "candidate_lines(buf, limit, chars_fullmatch)") || as_ssize(args[1], &limit))
        return NULL;
    fullmatch = args[2];
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = (const unsigned char *)view.buf;
    n = view.len;
    out = PyList_New(0);
    if (out == NULL)
        goto fail;
    a = n == 0 ? -1 : START[p[0]] ? 0 : next_start(p, 0, n);
    while (a >= 0) {
        const unsigned char *nl;
        Py_ssize_t e;
        int kind;
        nl = find_byte(p, a, n, '\n');
        e = nl == NULL ? n : (nl - p);
        kind = line_kind(p + a, e - a);
        if (kind == 2) {
            PyObject *r = PyObject_CallFunction(fullmatch, "Onn", args[0], a, e);
            if (r == NULL)
                goto fail;
            kind = r != Py_None;
            Py_DECREF(r);
        }
        if (kind) {
            PyObject *v;
            if (++count > limit) {
                Py_DECREF(out);
                PyBuffer_Release(&view);
                Py_RETURN_NONE;
            }
            v = PyLong_FromSsize_t(a);
            if (v == NULL || PyList_Append(out, v) < 0) {
                Py_XDECREF(v);
                goto fail;
            }
            Py_DECREF(v);
        }
        if (nl == NULL)
            break;
        a = next_start(p, e, n);
    }
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- %HH triggers --------------------------------------------------- */

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
    const unsigned char *bytes32;
    const unsigned char *pairs;
    const uint32_t *triples;
    Py_ssize_t ntriples;
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

/* The first %HH token (any case) at or after a, or -1. SSE2: each 16-byte
 * block's '%' with two hex digits after at once (a run of '%' costs no check
 * each), memchr over a block without a '%'. */
static Py_ssize_t
next_token(const unsigned char *p, Py_ssize_t a, Py_ssize_t n)
{
#ifdef HAVE_SSE2
    const __m128i pct = _mm_set1_epi8('%'), low = _mm_set1_epi8(0x20);
    while (a + 18 <= n) {
        __m128i v1, v2;
        int m = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + a)), pct));
        if (m == 0) {
            const unsigned char *q = memchr(p + a + 16, '%', (size_t)(n - a - 16));
            if (q == NULL)
                return -1;
            a = q - p;
            continue;
        }
        v1 = _mm_loadu_si128((const __m128i *)(p + a + 1));
        v2 = _mm_loadu_si128((const __m128i *)(p + a + 2));
        m &= _mm_movemask_epi8(_mm_or_si128(in_range(v1, '0', '9'), in_range(_mm_or_si128(v1, low), 'a', 'f')));
        m &= _mm_movemask_epi8(_mm_or_si128(in_range(v2, '0', '9'), in_range(_mm_or_si128(v2, low), 'a', 'f')));
        if (m)
            return a + ctz16(m);
        a += 16;
    }
#endif
    for (; a + 3 <= n; a++) {
        const unsigned char *q = memchr(p + a, '%', (size_t)(n - a));
        if (q == NULL)
            return -1;
        a = q - p;
        if (a + 3 <= n && ISHEX(p[a + 1]) && ISHEX(p[a + 2]))
            return a;
    }
    return -1;
}

static PyObject *
percent_hits(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t n, i, width;
    percent_ctx c;
    PyObject *out = NULL;
    const unsigned char *p, *q;

    if (nargs != 5 || !PyBytes_Check(args[1]) || PyBytes_GET_SIZE(args[1]) != 32
        || !PyBytes_Check(args[2]) || PyBytes_GET_SIZE(args[2]) != 8192
        || !PyBytes_Check(args[3]) || PyBytes_GET_SIZE(args[3]) % 4) {
        PyErr_SetString(PyExc_TypeError,
                        "percent_hits(buf, bytes32: bytes[32], pairs: bytes[8192], triples: bytes, width)");
        return NULL;
    }
    if (as_ssize(args[4], &width))
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = (const unsigned char *)view.buf;
    n = view.len;
    q = n ? memchr(p, '%', (size_t)n) : NULL;
    if (q == NULL) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    c.p = p;
    c.n = n;
    c.bytes32 = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    c.pairs = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    c.triples = (const uint32_t *)PyBytes_AS_STRING(args[3]);
    c.ntriples = PyBytes_GET_SIZE(args[3]) / 4;
    out = PyList_New(0);
    if (out == NULL)
        goto fail;
    for (i = next_token(p, q - p, n); i >= 0; i = next_token(p, i + 3, n)) {
        Py_ssize_t s = i, e = i + 3;
        int b = token_at(&c, s);
        if (!((c.bytes32[b >> 3] >> (b & 7)) & 1))
            continue;
        /* a token of a pattern byte: a trigger? (views.PercentGate.hits) */
        if (width > 1) {
            int ok = 0, x;
            x = s >= 3 ? token_at(&c, s - 3) : -1;
            if (x < 0 && s >= 1)
                x = p[s - 1];
            if (x >= 0 && has_pair(&c, x, b))
                ok = 1;
            if (!ok) {
                x = token_at(&c, e);
                if (x < 0 && e < n)
                    x = p[e];
                if (x >= 0 && has_pair(&c, b, x))
                    ok = 1;
            }
            if (ok && width > 2 && e < n - 3 && !in_triple(&c, s, b))
                ok = 0;
            if (!ok)
                continue;
        }
        {
            PyObject *t = Py_BuildValue("(nn)", s, e);
            if (t == NULL || PyList_Append(out, t) < 0) {
                Py_XDECREF(t);
                goto fail;
            }
            Py_DECREF(t);
        }
    }
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- the line-break view ------------------------------------------- */



/* strip_breaks(buf: bytes) -> bytes: buf less every '\r' and '\n' (buf itself
 * when it holds none). SSE2: 16-byte blocks, a block without a break is
 * copied whole; elsewhere a scalar loop. */
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
    w = i;
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

static PyMethodDef methods[] = {
    {"last_not_break", (PyCFunction)(void (*)(void))last_not_break, METH_FASTCALL,
     "last_not_break(buf, end) -> int (the last offset below end that is no \\r or \\n, or -1)"},
    {"strip_breaks", strip_breaks, METH_O, "strip_breaks(buf: bytes) -> bytes (buf less every \\r and \\n)"},
    {"dump_sync", (PyCFunction)(void (*)(void))dump_sync, METH_FASTCALL,
     "dump_sync(buf, i, line_max) -> int (dumps.DumpFinder.sync)"},
    {"candidate_lines", (PyCFunction)(void (*)(void))candidate_lines, METH_FASTCALL,
     "candidate_lines(buf, limit, chars_fullmatch) -> list[int] | None"},
    {"percent_hits", (PyCFunction)(void (*)(void))percent_hits, METH_FASTCALL,
     "percent_hits(buf, bytes32, pairs8192, triples, width) -> list[tuple[int, int]] | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The redactor views' gates in C (optional; see paddedcell.redactor.dumps).", -1, methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    int c;
    init_tables();
    for (c = 0; c < 256; c++)
        START[c] = (unsigned char)(ISHEX(c) || c == ' ' || c == '\t' || c == '-');
    return PyModule_Create(&module);
}
