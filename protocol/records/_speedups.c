/* Optional compiled fast path of the record codec (decode.py, encode.py, view.py and
 * broker/log_validator.py's count_records). Same results as the pure-Python code, byte
 * for byte; tests/unit/protocol/test_record_speedups.py holds them to each other.
 *
 * How this works: every function walks an uncompressed records section (the bytes after
 * a batch's 61-byte header; the record layout is in types.py) with a bounds check before
 * every byte it reads. Whenever the input is anything but plainly well formed (a length
 * past the end, a negative length other than a null's -1, a varint of 10 bytes, fields
 * that do not end where the record length says, an offset that overflows int64...) it
 * returns None (count_records: -1) and the caller hands the input to the pure-Python
 * code, which raises the precise error. So this file never decides what is corrupt or
 * how to say it, and the two paths raise the same errors by construction; it only makes
 * the common case fast.
 *
 * decode_records(section, base_offset, base_timestamp, max_timestamp, log_append,
 *                count, cls, prefix, suffix)
 *     -> list of cls instances (tuple subclasses), each
 *        prefix + (offset, timestamp, key, value, headers) + suffix; or None.
 * scan_values(data, start, stop, count)
 *     -> (value starts, value ends (-1: null), any null) for the records filling
 *        data[start:stop] exactly (view.py's _scan); or None.
 * count_records(buf, start, end)
 *     -> how many records fill buf[start:end] exactly, the last one's offsetDelta being
 *        its index (log_validator.count_records); -1 for anything else.
 * encode_values(values)
 *     -> the records section encode.py's encode_values writes; None unless every value
 *        is a bytes object.
 * encode_records(records, timestamps, base_timestamp, Record)
 *     -> the records section encode.py's encode_batch writes; None for any input the
 *        Python encoder should judge (see the function).
 * batch_header(buf, pos)
 *     -> the 13 header fields of the batch at pos (batch.py's validate_batch) when it is
 *        whole, well formed and matches its CRC-32C; None for anything else, and for
 *        batches over CHECKED_BATCH_BYTES or a CPU without the CRC-32C instruction.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The smallest record: length, attributes, timestampDelta, offsetDelta, key length,
 * value length and header count, one byte each. More records claimed than this allows
 * cannot fit, so no list is sized from a hostile count. */
#define MIN_RECORD_BYTES 7

/* One record's fields as positions into the section; -1 lengths mean null. */
typedef struct {
    int64_t offset_delta;
    int64_t timestamp_delta;
    Py_ssize_t key_pos;
    int64_t key_len;
    Py_ssize_t value_pos;
    int64_t value_len;
    Py_ssize_t headers_pos; /* the first header, after the count */
    int64_t header_count;
} span_t;

/* A raw (still zigzagged) varint of at most 9 bytes read from p[*pos] with nothing read
 * at or past p[limit]: 9 * 7 = 63 bits, so it fits. Longer ones are valid up to 10 bytes
 * but never written for these fields: left to the Python code, whose ints have no width. */
static inline int
read_raw(const uint8_t *p, Py_ssize_t limit, Py_ssize_t *pos, uint64_t *out)
{
    uint64_t n = 0;
    Py_ssize_t i = *pos;
    for (int shift = 0; shift < 63; shift += 7) {
        if (i < 0 || i >= limit)
            return -1;
        uint8_t b = p[i++];
        n |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *pos = i;
            *out = n;
            return 0;
        }
    }
    return -1;
}

static inline int64_t
unzigzag(uint64_t n)
{
    return (int64_t)(n >> 1) ^ -(int64_t)(n & 1);
}

/* A zigzag length that is -1 (null) or fits before limit from *pos; else -1 returned. */
static inline int
read_length(const uint8_t *p, Py_ssize_t limit, Py_ssize_t *pos, int64_t *len)
{
    uint64_t raw;
    if (read_raw(p, limit, pos, &raw) < 0)
        return -1;
    int64_t n = unzigzag(raw);
    if (n < -1 || n > (int64_t)(limit - *pos))
        return -1;
    *len = n;
    return 0;
}

/* Parse the record at *pos (nothing read at or past limit) into s; 0 on success (then
 * *pos is past it), -1 if the record is not plainly well formed. */
static int
scan_one(const uint8_t *p, Py_ssize_t limit, Py_ssize_t *pos, span_t *s)
{
    Py_ssize_t i = *pos;
    uint64_t raw;
    if (read_raw(p, limit, &i, &raw) < 0)
        return -1;
    int64_t length = unzigzag(raw);
    if (length < 0 || length > (int64_t)(limit - i))
        return -1;
    Py_ssize_t end = i + (Py_ssize_t)length;
    i += 1; /* attributes: unused in v2 (read_raw refuses i >= end) */
    if (read_raw(p, end, &i, &raw) < 0)
        return -1;
    s->timestamp_delta = unzigzag(raw);
    if (read_raw(p, end, &i, &raw) < 0)
        return -1;
    s->offset_delta = unzigzag(raw);
    /* key: the Python decoder takes a first byte of 1 as null and decodes anything else
     * as a length, so a non-canonical null is not null there: left to Python. */
    if (i >= end)
        return -1;
    if (p[i] == 1) {
        s->key_len = -1;
        s->key_pos = ++i;
    }
    else {
        if (read_length(p, end, &i, &s->key_len) < 0 || s->key_len < 0)
            return -1;
        s->key_pos = i;
        i += (Py_ssize_t)s->key_len;
    }
    if (read_length(p, end, &i, &s->value_len) < 0)
        return -1;
    s->value_pos = i;
    if (s->value_len > 0)
        i += (Py_ssize_t)s->value_len;
    if (read_raw(p, end, &i, &raw) < 0)
        return -1;
    int64_t count = unzigzag(raw);
    /* each header takes at least two bytes: a larger count cannot fit */
    if (count < 0 || count > (int64_t)(end - i) / 2)
        return -1;
    s->header_count = count;
    s->headers_pos = i;
    for (int64_t h = 0; h < count; h++) {
        int64_t n;
        if (read_length(p, end, &i, &n) < 0 || n < 0)
            return -1;
        i += (Py_ssize_t)n;
        if (read_length(p, end, &i, &n) < 0)
            return -1;
        if (n > 0)
            i += (Py_ssize_t)n;
    }
    if (i != end)
        return -1;
    *pos = i;
    return 0;
}

/* Objects that can hold no reference to a record: a tuple of them needs no tracking. */
static int
is_atomic(PyObject *obj)
{
    /* int subclasses too: the timestamp type is an IntEnum member */
    return obj == Py_None || PyLong_Check(obj) || PyUnicode_CheckExact(obj) ||
           PyBytes_CheckExact(obj);
}

/* The headers tuple of a record: ((name: str, value: bytes | None), ...), from a record
 * scan_one has accepted (so every length is known to fit). */
static PyObject *
build_headers(const uint8_t *p, Py_ssize_t limit, const span_t *s)
{
    PyObject *headers = PyTuple_New((Py_ssize_t)s->header_count);
    if (headers == NULL)
        return NULL;
    Py_ssize_t i = s->headers_pos;
    for (Py_ssize_t h = 0; h < (Py_ssize_t)s->header_count; h++) {
        int64_t n = 0;
        if (read_length(p, limit, &i, &n) < 0 || n < 0)
            goto corrupt;
        PyObject *name = PyUnicode_DecodeUTF8((const char *)p + i, (Py_ssize_t)n, "replace");
        if (name == NULL)
            goto fail;
        i += (Py_ssize_t)n;
        if (read_length(p, limit, &i, &n) < 0) {
            Py_DECREF(name);
            goto corrupt;
        }
        PyObject *value;
        if (n < 0) {
            value = Py_NewRef(Py_None);
        }
        else {
            value = PyBytes_FromStringAndSize((const char *)p + i, (Py_ssize_t)n);
            i += (Py_ssize_t)n;
        }
        if (value == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, name, value);
        Py_DECREF(name);
        Py_DECREF(value);
        if (pair == NULL)
            goto fail;
        PyObject_GC_UnTrack(pair); /* str and bytes only: no cycle possible */
        PyTuple_SET_ITEM(headers, h, pair);
    }
    PyObject_GC_UnTrack(headers);
    return headers;
corrupt: /* cannot happen after scan_one; an error rather than a wrong answer */
    PyErr_SetString(PyExc_SystemError, "_speedups: record headers changed under the scan");
fail:
    Py_DECREF(headers);
    return NULL;
}

static PyObject *
bytes_or_none(const uint8_t *p, Py_ssize_t pos, int64_t len)
{
    if (len < 0)
        return Py_NewRef(Py_None);
    return PyBytes_FromStringAndSize((const char *)p + pos, (Py_ssize_t)len);
}

static PyObject *
decode_records(PyObject *module, PyObject *args)
{
    Py_buffer view;
    long long base_offset, base_timestamp, max_timestamp;
    int log_append;
    Py_ssize_t count;
    PyTypeObject *cls;
    PyObject *prefix, *suffix;
    if (!PyArg_ParseTuple(args, "y*LLLpnO!O!O!", &view, &base_offset, &base_timestamp,
                          &max_timestamp, &log_append, &count, &PyType_Type, &cls,
                          &PyTuple_Type, &prefix, &PyTuple_Type, &suffix))
        return NULL;
    if (!PyType_IsSubtype(cls, &PyTuple_Type)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass");
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t size = view.len;
    Py_ssize_t n_prefix = PyTuple_GET_SIZE(prefix), n_suffix = PyTuple_GET_SIZE(suffix);
    Py_ssize_t width = n_prefix + 5 + n_suffix;
    /* A record may be untracked by the cycle collector when nothing in it can refer back
     * to it: the fields made here are ints, bytes, None and tuples of those, and the
     * prefix and suffix (topic, partition, timestamp type) must be atomic too. */
    int untrack = PyType_HasFeature(cls, Py_TPFLAGS_HAVE_GC) && cls->tp_dictoffset == 0;
    for (Py_ssize_t j = 0; j < n_prefix && untrack; j++)
        untrack = is_atomic(PyTuple_GET_ITEM(prefix, j));
    for (Py_ssize_t j = 0; j < n_suffix && untrack; j++)
        untrack = is_atomic(PyTuple_GET_ITEM(suffix, j));
    if (count < 0)
        count = 0;
    PyObject *records = NULL;
    if (count > size / MIN_RECORD_BYTES)
        goto fallback;
    records = PyList_New(count);
    if (records == NULL)
        goto error;
    Py_ssize_t pos = 0;
    for (Py_ssize_t r = 0; r < count; r++) {
        span_t s;
        if (scan_one(p, size, &pos, &s) < 0)
            goto fallback;
        int64_t offset, timestamp;
        if (__builtin_add_overflow((int64_t)base_offset, s.offset_delta, &offset))
            goto fallback;
        if (log_append)
            timestamp = max_timestamp;
        else if (__builtin_add_overflow((int64_t)base_timestamp, s.timestamp_delta, &timestamp))
            goto fallback;
        PyObject *row = cls->tp_alloc(cls, width);
        if (row == NULL)
            goto error;
        PyList_SET_ITEM(records, r, row);
        Py_ssize_t k = 0;
        for (Py_ssize_t j = 0; j < n_prefix; j++)
            PyTuple_SET_ITEM(row, k++, Py_NewRef(PyTuple_GET_ITEM(prefix, j)));
        PyObject *fields[5];
        fields[0] = PyLong_FromLongLong(offset);
        fields[1] = PyLong_FromLongLong(timestamp);
        fields[2] = bytes_or_none(p, s.key_pos, s.key_len);
        fields[3] = bytes_or_none(p, s.value_pos, s.value_len);
        fields[4] = s.header_count ? build_headers(p, size, &s) : PyTuple_New(0);
        /* set even when NULL (a tuple may hold NULLs while it is being filled), so that
         * the list frees whatever was made */
        for (int j = 0; j < 5; j++)
            PyTuple_SET_ITEM(row, k++, fields[j]);
        for (int j = 0; j < 5; j++)
            if (fields[j] == NULL)
                goto error;
        for (Py_ssize_t j = 0; j < n_suffix; j++)
            PyTuple_SET_ITEM(row, k++, Py_NewRef(PyTuple_GET_ITEM(suffix, j)));
        /* Untracked, as CPython's collector itself untracks tuples that can hold no
         * cycle: otherwise every collection walks every record still held, and decoding
         * a large poll spends much of its time in the collector. */
        if (untrack)
            PyObject_GC_UnTrack(row);
    }
    if (pos != size)
        goto fallback;
    PyBuffer_Release(&view);
    return records;
fallback:
    Py_XDECREF(records);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
error:
    Py_XDECREF(records);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *
scan_values(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, stop, count;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &start, &stop, &count))
        return NULL;
    const uint8_t *p = (const uint8_t *)view.buf;
    PyObject *starts = NULL, *ends = NULL, *result = NULL;
    int nulls = 0;
    if (count < 0)
        count = 0;
    if (start < 0 || stop > view.len || start > stop ||
        count > (stop - start) / MIN_RECORD_BYTES)
        goto fallback;
    starts = PyList_New(count);
    ends = PyList_New(count);
    if (starts == NULL || ends == NULL)
        goto error;
    Py_ssize_t pos = start;
    for (Py_ssize_t r = 0; r < count; r++) {
        span_t s;
        if (scan_one(p, stop, &pos, &s) < 0)
            goto fallback;
        PyObject *first = PyLong_FromSsize_t(s.value_pos);
        if (first == NULL)
            goto error;
        PyList_SET_ITEM(starts, r, first);
        PyObject *last;
        if (s.value_len < 0) {
            nulls = 1;
            last = PyLong_FromLong(-1);
        }
        else {
            last = PyLong_FromSsize_t(s.value_pos + (Py_ssize_t)s.value_len);
        }
        if (last == NULL)
            goto error;
        PyList_SET_ITEM(ends, r, last);
    }
    if (pos != stop)
        goto fallback;
    result = PyTuple_Pack(3, starts, ends, nulls ? Py_True : Py_False);
    Py_DECREF(starts);
    Py_DECREF(ends);
    PyBuffer_Release(&view);
    return result;
fallback:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
error:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *
count_records(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end))
        return NULL;
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t found = -1;
    if (start < 0 || end > view.len || start > end)
        goto done;
    Py_ssize_t cursor = start, last = -1, n = 0;
    while (cursor < end) {
        uint64_t raw;
        Py_ssize_t body = cursor;
        /* zigzag: odd is negative; a record is never empty */
        if (read_raw(p, end, &body, &raw) < 0 || raw & 1 || raw == 0)
            goto done;
        if ((uint64_t)(end - body) < (raw >> 1))
            goto done;
        cursor = body + (Py_ssize_t)(raw >> 1);
        last = body;
        n++;
    }
    if (n == 0)
        goto done;
    /* attributes (one byte), timestampDelta, then offsetDelta, all inside the batch */
    Py_ssize_t at = last + 1;
    uint64_t raw;
    if (read_raw(p, end, &at, &raw) < 0 || read_raw(p, end, &at, &raw) < 0)
        goto done;
    if (unzigzag(raw) == (int64_t)(n - 1))
        found = n;
done:
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(found);
}

/* Bytes of the unsigned varint of raw (an already zigzagged value). */
static inline Py_ssize_t
raw_varint_size(uint64_t raw)
{
    Py_ssize_t size = 1;
    while (raw >= 0x80) {
        raw >>= 7;
        size++;
    }
    return size;
}

static inline char *
put_raw_varint(char *out, uint64_t raw)
{
    while (raw >= 0x80) {
        *out++ = (char)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *out++ = (char)raw;
    return out;
}

/* Bytes of the zigzag varint of non-negative n. */
static inline Py_ssize_t
varint_size(uint64_t n)
{
    return raw_varint_size(n << 1);
}

static inline char *
put_varint(char *out, uint64_t n)
{
    return put_raw_varint(out, n << 1);
}

/* Bytes of record i holding a value of n bytes, after its length varint: attributes,
 * timestampDelta 0, offsetDelta i, key length -1, value length, value, header count. */
static inline Py_ssize_t
body_size(Py_ssize_t i, Py_ssize_t n)
{
    return 4 + varint_size((uint64_t)i) + varint_size((uint64_t)n) + n;
}

static PyObject *
encode_values(PyObject *module, PyObject *arg)
{
    /* A tuple of the values: no Python code that runs while the output is allocated
     * (a finalizer) can then change what was measured. */
    PyObject *values = PySequence_Tuple(arg);
    if (values == NULL)
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(values);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = PyTuple_GET_ITEM(values, i);
        if (!PyBytes_CheckExact(value)) {
            Py_DECREF(values);
            Py_RETURN_NONE;
        }
        Py_ssize_t body = body_size(i, PyBytes_GET_SIZE(value));
        if (__builtin_add_overflow(total, varint_size((uint64_t)body) + body, &total)) {
            Py_DECREF(values);
            return PyErr_NoMemory();
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        Py_DECREF(values);
        return NULL;
    }
    char *p = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = PyTuple_GET_ITEM(values, i);
        Py_ssize_t n = PyBytes_GET_SIZE(value);
        p = put_varint(p, (uint64_t)body_size(i, n));
        *p++ = 0; /* attributes */
        *p++ = 0; /* timestampDelta */
        p = put_varint(p, (uint64_t)i);
        *p++ = 1; /* key length -1: null */
        p = put_varint(p, (uint64_t)n);
        memcpy(p, PyBytes_AS_STRING(value), (size_t)n);
        p += n;
        *p++ = 0; /* no headers */
    }
    Py_DECREF(values);
    return out;
}

/* Bytes of the zigzag varint of signed n. */
static inline Py_ssize_t
signed_varint_size(int64_t n)
{
    return raw_varint_size(((uint64_t)n << 1) ^ (uint64_t)(n >> 63));
}

static inline char *
put_signed_varint(char *out, int64_t n)
{
    return put_raw_varint(out, ((uint64_t)n << 1) ^ (uint64_t)(n >> 63));
}

/* A growable output buffer (PyMem: growing it runs no Python code). */
typedef struct {
    char *data;
    Py_ssize_t used, capacity;
} out_t;

static int
reserve(out_t *out, Py_ssize_t more)
{
    if (more <= out->capacity - out->used)
        return 0;
    Py_ssize_t want = out->capacity ? out->capacity : 4096;
    while (want - out->used < more) {
        if (want > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        want *= 2;
    }
    char *grown = PyMem_Realloc(out->data, (size_t)want);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->data = grown;
    out->capacity = want;
    return 0;
}

/* A key, value or header value: its length and bytes, or NULL data for null. 0 if it is
 * None or an exact bytes object; -1 otherwise (left to Python, which accepts others). */
static inline int
nullable_bytes(PyObject *obj, const char **data, Py_ssize_t *len)
{
    if (obj == Py_None) {
        *data = NULL;
        *len = -1;
        return 0;
    }
    if (!PyBytes_CheckExact(obj))
        return -1;
    *data = PyBytes_AS_STRING(obj);
    *len = PyBytes_GET_SIZE(obj);
    return 0;
}

static inline Py_ssize_t
nullable_size(Py_ssize_t len)
{
    return signed_varint_size(len) + (len > 0 ? len : 0);
}

static inline char *
put_nullable(char *p, const char *data, Py_ssize_t len)
{
    p = put_signed_varint(p, len);
    if (len > 0) {
        memcpy(p, data, (size_t)len);
        p += len;
    }
    return p;
}

/* The records section encode.py's encode_batch writes: record i is records[i] (an exact
 * `cls`, i.e. Record: value, key, headers, timestamp) with offsetDelta i and
 * timestampDelta timestamps[i] - base_timestamp. None for anything the Python encoder
 * should handle itself: another record type, keys, values or header values that are not
 * bytes or None, headers that are not a tuple or list of (str, bytes | None) tuples, a
 * header name that is not UTF-8 encodable, a timestamp outside int64. */
static PyObject *
encode_records(PyObject *module, PyObject *args)
{
    PyObject *records_arg, *timestamps_arg, *base_arg, *cls;
    if (!PyArg_ParseTuple(args, "OOOO!", &records_arg, &timestamps_arg, &base_arg,
                          &PyType_Type, &cls))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass");
        return NULL;
    }
    /* not an int, or outside int64: Python says what happens */
    if (!PyLong_Check(base_arg))
        Py_RETURN_NONE;
    int base_overflow = 0;
    long long base_timestamp = PyLong_AsLongLongAndOverflow(base_arg, &base_overflow);
    if (base_overflow)
        Py_RETURN_NONE;
    PyObject *records = PySequence_Tuple(records_arg);
    if (records == NULL)
        return NULL;
    PyObject *timestamps = PySequence_Tuple(timestamps_arg);
    if (timestamps == NULL) {
        Py_DECREF(records);
        return NULL;
    }
    out_t out = {NULL, 0, 0};
    PyObject *result = NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(records);
    if (PyTuple_GET_SIZE(timestamps) != count)
        goto fallback;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *record = PyTuple_GET_ITEM(records, i);
        if ((PyObject *)Py_TYPE(record) != cls || PyTuple_GET_SIZE(record) != 4)
            goto fallback;
        const char *value, *key;
        Py_ssize_t value_len, key_len;
        if (nullable_bytes(PyTuple_GET_ITEM(record, 0), &value, &value_len) < 0 ||
            nullable_bytes(PyTuple_GET_ITEM(record, 1), &key, &key_len) < 0)
            goto fallback;
        PyObject *headers = PyTuple_GET_ITEM(record, 2);
        if (!PyTuple_CheckExact(headers) && !PyList_CheckExact(headers))
            goto fallback;
        PyObject *stamp = PyTuple_GET_ITEM(timestamps, i);
        if (!PyLong_Check(stamp))
            goto fallback;
        int overflow = 0;
        long long timestamp = PyLong_AsLongLongAndOverflow(stamp, &overflow);
        int64_t delta;
        if (overflow || __builtin_sub_overflow((int64_t)timestamp, (int64_t)base_timestamp,
                                               &delta))
            goto fallback;
        /* The body: attributes, timestampDelta, offsetDelta, key, value, headers. The
         * header names' UTF-8 is made here (cached in each str), before any writing. */
        Py_ssize_t n_headers = PySequence_Fast_GET_SIZE(headers);
        Py_ssize_t body = 1 + signed_varint_size(delta) + signed_varint_size(i) +
                          nullable_size(key_len) + nullable_size(value_len) +
                          signed_varint_size(n_headers);
        for (Py_ssize_t h = 0; h < n_headers; h++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(headers, h);
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
                !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)))
                goto fallback;
            Py_ssize_t name_len, header_len;
            const char *header_value;
            if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &name_len) == NULL) {
                PyErr_Clear(); /* e.g. a lone surrogate: Python raises its own error */
                goto fallback;
            }
            if (nullable_bytes(PyTuple_GET_ITEM(pair, 1), &header_value, &header_len) < 0)
                goto fallback;
            body += signed_varint_size(name_len) + name_len + nullable_size(header_len);
        }
        if (reserve(&out, signed_varint_size(body) + body) < 0)
            goto error;
        /* Nothing since the sizes were taken can have run Python code (PyMem only). */
        char *p = out.data + out.used;
        p = put_signed_varint(p, body);
        *p++ = 0; /* attributes */
        p = put_signed_varint(p, delta);
        p = put_signed_varint(p, i);
        p = put_nullable(p, key, key_len);
        p = put_nullable(p, value, value_len);
        p = put_signed_varint(p, n_headers);
        for (Py_ssize_t h = 0; h < n_headers; h++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(headers, h);
            /* Both calls succeeded on the same objects in the sizing pass above. */
            Py_ssize_t name_len = 0, header_len = -1;
            const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &name_len);
            const char *header_value = NULL;
            (void)nullable_bytes(PyTuple_GET_ITEM(pair, 1), &header_value, &header_len);
            p = put_nullable(p, name, name_len);
            p = put_nullable(p, header_value, header_len);
        }
        out.used = p - out.data;
    }
    result = PyBytes_FromStringAndSize(out.data, out.used);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    PyMem_Free(out.data);
    Py_DECREF(records);
    Py_DECREF(timestamps);
    return result;
}

/* batch_header: the RecordBatch v2 header (batch.py has the table), read big-endian. */
#define BATCH_HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define CRC_START 21
#define MAX_CODEC 4 /* zstd */

/* Batches up to this size are checked here; larger ones go to the Python code, whose
 * CRC-32C library interleaves streams, which beats this one-stream loop on long input
 * while the call overhead it saves no longer matters. */
#define CHECKED_BATCH_BYTES 4096

static inline uint64_t
be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline uint32_t
be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int have_crc32c_instruction = 0; /* set at import */

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define CRC32C_HARDWARE 1
/* CRC-32C (Castagnoli) with SSE 4.2's crc32 instruction, 8 bytes a step: the same
 * function as the crc32c package (initial and final inversion included). */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(const uint8_t *p, Py_ssize_t n)
{
    uint64_t crc = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __builtin_ia32_crc32di(crc, word);
        p += 8;
        n -= 8;
    }
    uint32_t c = (uint32_t)crc;
    while (n-- > 0)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c ^ 0xFFFFFFFFu;
}
#endif

static PyObject *
batch_header(PyObject *module, PyObject *args)
{
    Py_buffer view;
    PyObject *where;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyLong_Type, &where))
        return NULL;
    /* A position past any buffer (even past Py_ssize_t) is the Python code's to refuse. */
    Py_ssize_t pos = PyLong_AsSsize_t(where);
    if (pos == -1 && PyErr_Occurred())
        PyErr_Clear();
    const uint8_t *p = (const uint8_t *)view.buf;
    PyObject *result = NULL;
    if (!have_crc32c_instruction || pos < 0 || view.len - pos < BATCH_HEADER_SIZE)
        goto fallback;
    const uint8_t *h = p + pos;
    int32_t batch_length = (int32_t)be32(h + 8);
    int32_t last_offset_delta = (int32_t)be32(h + 23);
    int32_t count = (int32_t)be32(h + 57);
    int16_t attributes = (int16_t)(((uint16_t)h[21] << 8) | h[22]);
    if (h[16] != 2 || batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD ||
        batch_length > CHECKED_BATCH_BYTES - LOG_OVERHEAD ||
        (Py_ssize_t)batch_length + LOG_OVERHEAD > view.len - pos || count < 0 ||
        last_offset_delta < 0 || (int64_t)count > (int64_t)last_offset_delta + 1 ||
        (attributes & 0x07) > MAX_CODEC)
        goto fallback;
    uint32_t crc = be32(h + 17);
#ifdef CRC32C_HARDWARE
    if (crc32c_hw(h + CRC_START, (Py_ssize_t)batch_length + LOG_OVERHEAD - CRC_START) != crc)
        goto fallback;
#else
    goto fallback;
#endif
    result = Py_BuildValue(
        "(LiibkhiLLLhii)", (long long)(int64_t)be64(h), (int)batch_length,
        (int)(int32_t)be32(h + 12), (int)2, (unsigned long)crc, (short)attributes,
        (int)last_offset_delta, (long long)(int64_t)be64(h + 27),
        (long long)(int64_t)be64(h + 35), (long long)(int64_t)be64(h + 43),
        (short)(int16_t)(((uint16_t)h[51] << 8) | h[52]), (int)(int32_t)be32(h + 53),
        (int)count);
    PyBuffer_Release(&view);
    return result;
fallback:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "Decode a records section into tuples of cls; None when not plainly well formed."},
    {"scan_values", scan_values, METH_VARARGS,
     "Where each record's value lies in data[start:stop]; None when not plainly well "
     "formed."},
    {"count_records", count_records, METH_VARARGS,
     "Records filling buf[start:end] exactly, last offsetDelta checked; -1 otherwise."},
    {"encode_values", encode_values, METH_O,
     "The records section of a batch of values (null keys, no headers, one timestamp)."},
    {"encode_records", encode_records, METH_VARARGS,
     "The records section of a batch of Records; None for what Python should encode."},
    {"batch_header", batch_header, METH_VARARGS,
     "The header fields of a whole, well-formed small batch whose CRC-32C matches; "
     "None otherwise."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Compiled fast path of the record codec (see _speedups.c).", -1, methods, NULL, NULL,
    NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
#ifdef CRC32C_HARDWARE
    __builtin_cpu_init();
    have_crc32c_instruction = __builtin_cpu_supports("sse4.2");
#endif
    return PyModule_Create(&module);
}
