/*
 * model.c — the innet integer model file (docs/dnn.md, "Model file"): parse
 * and check it, and the test set files that go with it.
 *
 *   offset 0   header (20 bytes)  "INNETDNN" | u16 version | u16 n_layers |
 *                                 u16 in_c | u16 in_h | u16 in_w | u16 reserved
 *   20         n_layers records   16-byte layer header, then (conv2d, dense)
 *                                 int8 weights, zero padding to 4 bytes,
 *                                 int32 biases
 *   len - 4    u32 CRC-32 of every byte before it
 *
 * All integers little-endian. The parser never trusts a count: every size is
 * computed in 64 bits and checked against the bytes left and the limits in
 * innet/dnn.h before anything is read or allocated.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/dnn.h"

#define HDR_LEN   20u
#define LHDR_LEN  16u

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err != NULL && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

uint32_t innet_dnn_crc32(uint32_t crc, const void *data, size_t len)
{
	static uint32_t table[256];
	static int ready;
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
			table[i] = c; /* idempotent: racing initialisers write the same values */
		}
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	const uint8_t *p = data;
	crc = ~crc;
	for (size_t i = 0; i < len; i++)
		crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
	return ~crc;
}

const char *innet_dnn_layer_name(enum innet_dnn_layer_type t)
{
	switch (t) {
	case INNET_DNN_CONV2D: return "conv2d";
	case INNET_DNN_DENSE: return "dense";
	case INNET_DNN_RELU: return "relu";
	case INNET_DNN_MAXPOOL2: return "maxpool2";
	case INNET_DNN_FLATTEN: return "flatten";
	}
	return "?";
}

static bool shape_ok(struct innet_dnn_shape s)
{
	return s.c >= 1 && s.h >= 1 && s.w >= 1 && s.c <= INNET_DNN_MAX_DIM && s.h <= INNET_DNN_MAX_DIM &&
	       s.w <= INNET_DNN_MAX_DIM && (uint64_t)s.c * s.h * s.w <= INNET_DNN_MAX_VALUES;
}

/* Check one layer's header against its input shape; fill in its output shape
 * and weight count. */
static int layer_shape(struct innet_dnn_layer *l, const uint8_t *h, size_t off, bool is_last,
		       char *err, size_t errlen)
{
	const char *name = innet_dnn_layer_name(l->type);
	uint32_t units = le32(h + 8);
	if (le16(h + 6) != 0)
		return fail(err, errlen, "layer at offset %zu (%s): reserved bytes must be zero", off, name);
	l->out = l->in;
	l->kh = l->kw = l->stride = 1;
	l->pad = 0;
	switch (l->type) {
	case INNET_DNN_CONV2D:
		l->kh = h[2];
		l->kw = h[3];
		l->stride = h[4];
		l->pad = h[5];
		if (l->kh < 1 || l->kw < 1 || l->kh > INNET_DNN_MAX_KERNEL || l->kw > INNET_DNN_MAX_KERNEL)
			return fail(err, errlen, "layer at offset %zu (conv2d): kernel %ux%u outside 1..%u",
				    off, l->kh, l->kw, INNET_DNN_MAX_KERNEL);
		if (l->stride < 1 || l->stride > 8)
			return fail(err, errlen, "layer at offset %zu (conv2d): stride %u outside 1..8", off,
				    l->stride);
		if (l->pad >= l->kh || l->pad >= l->kw)
			return fail(err, errlen, "layer at offset %zu (conv2d): padding %u must be smaller "
					    "than the kernel", off, l->pad);
		if (l->in.h + 2 * l->pad < l->kh || l->in.w + 2 * l->pad < l->kw)
			return fail(err, errlen, "layer at offset %zu (conv2d): kernel %ux%u larger than the "
					    "padded input %ux%u", off, l->kh, l->kw, l->in.h + 2 * l->pad,
				    l->in.w + 2 * l->pad);
		if (units < 1 || units > INNET_DNN_MAX_DIM)
			return fail(err, errlen, "layer at offset %zu (conv2d): %u filters outside 1..%u", off,
				    units, INNET_DNN_MAX_DIM);
		l->out = (struct innet_dnn_shape){ units, (l->in.h + 2 * l->pad - l->kh) / l->stride + 1,
						   (l->in.w + 2 * l->pad - l->kw) / l->stride + 1 };
		break;
	case INNET_DNN_DENSE:
		if (h[2] | h[3] | h[4] | h[5])
			return fail(err, errlen, "layer at offset %zu (dense): kernel/stride/pad bytes must "
					    "be zero", off);
		if (l->in.h != 1 || l->in.w != 1)
			return fail(err, errlen, "layer at offset %zu (dense): input is %ux%ux%u, not a "
					    "vector (put a flatten layer before it)", off, l->in.c,
				    l->in.h, l->in.w);
		if (units < 1 || units > INNET_DNN_MAX_VALUES)
			return fail(err, errlen, "layer at offset %zu (dense): %u neurons outside 1..%u", off,
				    units, INNET_DNN_MAX_VALUES);
		l->out = (struct innet_dnn_shape){ units, 1, 1 };
		break;
	case INNET_DNN_RELU:
	case INNET_DNN_MAXPOOL2:
	case INNET_DNN_FLATTEN:
		if (h[1] | h[2] | h[3] | h[4] | h[5] || units != 0 || le32(h + 12) != 0)
			return fail(err, errlen, "layer at offset %zu (%s): parameter bytes must be zero",
				    off, name);
		if (l->type == INNET_DNN_MAXPOOL2) {
			if (l->in.h < 2 || l->in.w < 2)
				return fail(err, errlen, "layer at offset %zu (maxpool2): input %ux%u is "
						    "smaller than the 2x2 window", off, l->in.h, l->in.w);
			l->out.h = l->in.h / 2;
			l->out.w = l->in.w / 2;
		} else if (l->type == INNET_DNN_FLATTEN) {
			l->out = (struct innet_dnn_shape){ innet_dnn_shape_n(l->in), 1, 1 };
		}
		return 0;
	default:
		return fail(err, errlen, "layer at offset %zu: unknown type %u", off, (unsigned)l->type);
	}
	l->units = units;
	l->shift = h[1];
	if (l->shift > INNET_DNN_MAX_SHIFT)
		return fail(err, errlen, "layer at offset %zu (%s): shift %u outside 0..%u", off, name,
			    l->shift, INNET_DNN_MAX_SHIFT);
	if (is_last && l->shift != 0)
		return fail(err, errlen, "layer at offset %zu (%s): the last layer's outputs are the "
				    "logits (not requantized); its shift must be 0, not %u", off, name,
			    l->shift);
	if (!shape_ok(l->out))
		return fail(err, errlen, "layer at offset %zu (%s): output %ux%ux%u too large or empty",
			    off, name, l->out.c, l->out.h, l->out.w);
	uint64_t nw = (uint64_t)units * (l->type == INNET_DNN_CONV2D ? (uint64_t)l->in.c * l->kh * l->kw
								      : (uint64_t)innet_dnn_shape_n(l->in));
	if (nw > INNET_DNN_MAX_WEIGHTS)
		return fail(err, errlen, "layer at offset %zu (%s): %llu weights exceed %u", off, name,
			    (unsigned long long)nw, INNET_DNN_MAX_WEIGHTS);
	l->n_weights = (uint32_t)nw;
	return 0;
}

/* Worst-case |accumulator| of every unit must fit int32 (docs/dnn.md). */
static int check_range(struct innet_dnn_layer *l, size_t off, char *err, size_t errlen)
{
	uint32_t per = l->n_weights / l->units;
	l->weight_bits_set = 0;
	for (uint32_t u = 0; u < l->units; u++) {
		int64_t sum = 0;
		for (uint32_t i = 0; i < per; i++) {
			int32_t w = l->weights[(size_t)u * per + i];
			int32_t a = w < 0 ? -w : w;
			sum += a;
			l->weight_bits_set += (uint64_t)__builtin_popcount((unsigned)a);
		}
		int64_t b = l->biases[u];
		int64_t bound = sum * 128 + (b < 0 ? -b : b);
		if (bound > INT32_MAX)
			return fail(err, errlen, "layer at offset %zu (%s): unit %u can overflow its int32 "
					    "accumulator (sum|w| * 128 + |bias| = %lld)", off,
				    innet_dnn_layer_name(l->type), u, (long long)bound);
	}
	return 0;
}

int innet_dnn_model_parse(const void *data, size_t len, struct innet_dnn_model *m, char *err,
			  size_t errlen)
{
	memset(m, 0, sizeof(*m));
	const uint8_t *d = data;
	if (len < HDR_LEN + 4)
		return fail(err, errlen, "file too short: %zu bytes (a model has at least %u)", len,
			    HDR_LEN + 4);
	if (memcmp(d, INNET_DNN_MAGIC, 8) != 0)
		return fail(err, errlen, "not an innet model file (bad magic at offset 0)");
	uint32_t version = le16(d + 8);
	if (version != INNET_DNN_VERSION)
		return fail(err, errlen, "model format version %u is not supported (this innet reads "
				    "version %u)", version, INNET_DNN_VERSION);
	uint32_t want = le32(d + len - 4), crc = innet_dnn_crc32(0, d, len - 4);
	if (want != crc)
		return fail(err, errlen, "CRC mismatch: trailer says %08x, the contents give %08x "
				    "(file truncated or corrupted)", want, crc);
	uint32_t n_layers = le16(d + 10);
	struct innet_dnn_shape shape = { le16(d + 12), le16(d + 14), le16(d + 16) };
	if (le16(d + 18) != 0)
		return fail(err, errlen, "header: reserved bytes at offset 18 must be zero");
	if (n_layers < 1 || n_layers > INNET_DNN_MAX_LAYERS)
		return fail(err, errlen, "header: %u layers outside 1..%u", n_layers, INNET_DNN_MAX_LAYERS);
	if (!shape_ok(shape))
		return fail(err, errlen, "header: input shape %ux%ux%u is empty or too large", shape.c,
			    shape.h, shape.w);
	m->blob = malloc(len);
	if (m->blob == NULL)
		return -ENOMEM;
	memcpy(m->blob, d, len);
	m->blob_len = len;
	m->version = version;
	m->in = shape;
	m->crc = crc;
	size_t off = HDR_LEN, end = len - 4;
	int rc = 0;
	for (uint32_t i = 0; i < n_layers; i++) {
		if (end - off < LHDR_LEN) {
			rc = fail(err, errlen, "layer %u at offset %zu: truncated header (%zu bytes left)", i,
				  off, end - off);
			goto err_free;
		}
		const uint8_t *h = m->blob + off;
		struct innet_dnn_layer *l = &m->layers[i];
		l->type = h[0];
		l->in = shape;
		if ((rc = layer_shape(l, h, off, i == n_layers - 1, err, errlen)) != 0)
			goto err_free;
		size_t loff = off;
		off += LHDR_LEN;
		if (l->type == INNET_DNN_CONV2D || l->type == INNET_DNN_DENSE) {
			uint64_t wpad = ((uint64_t)l->n_weights + 3) & ~3ull;
			uint64_t payload = wpad + 4ull * l->units;
			if (le32(h + 12) != payload) {
				rc = fail(err, errlen, "layer %u at offset %zu (%s): payload is %u bytes, "
						      "the shapes need %llu", i, loff,
					  innet_dnn_layer_name(l->type), le32(h + 12),
					  (unsigned long long)payload);
				goto err_free;
			}
			if (end - off < payload) {
				rc = fail(err, errlen, "layer %u at offset %zu (%s): truncated: needs %llu "
						      "bytes of weights and biases, %zu left", i, loff,
					  innet_dnn_layer_name(l->type), (unsigned long long)payload,
					  end - off);
				goto err_free;
			}
			l->weights = (const int8_t *)(m->blob + off);
			for (uint64_t k = l->n_weights; k < wpad; k++)
				if (m->blob[off + k] != 0) {
					rc = fail(err, errlen, "layer %u (%s): padding after the weights "
							      "must be zero", i, innet_dnn_layer_name(l->type));
					goto err_free;
				}
			/* Biases are little-endian int32; convert in place on big-endian hosts.
			 * The blob is malloc'ed and wpad is a multiple of 4, so off + wpad is
			 * 4-aligned (HDR_LEN and LHDR_LEN are multiples of 4). */
			int32_t *b = (int32_t *)(void *)(m->blob + off + wpad);
			for (uint32_t u = 0; u < l->units; u++)
				b[u] = (int32_t)le32((const uint8_t *)&b[u]);
			l->biases = b;
			off += payload;
			if ((rc = check_range(l, loff, err, errlen)) != 0)
				goto err_free;
		}
		shape = l->out;
	}
	if (off != end) {
		rc = fail(err, errlen, "%zu unexpected bytes after the last layer (offset %zu)", end - off,
			  off);
		goto err_free;
	}
	const struct innet_dnn_layer *last = &m->layers[n_layers - 1];
	if (last->type != INNET_DNN_DENSE) {
		rc = fail(err, errlen, "the last layer is %s; it must be dense (its outputs are the logits)",
			  innet_dnn_layer_name(last->type));
		goto err_free;
	}
	m->n_layers = n_layers;
	m->n_classes = last->units;
	return 0;
err_free:
	innet_dnn_model_free(m);
	return rc;
}

/* Read a whole (small) file. */
static int read_file(const char *path, uint8_t **out, size_t *len, size_t max)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return -errno;
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	int rc = 0;
	while (buf != NULL) {
		if (n == cap) {
			if (cap >= max) {
				rc = -EFBIG;
				break;
			}
			uint8_t *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f))
				rc = -EIO;
			break;
		}
	}
	fclose(f);
	if (buf == NULL)
		rc = -ENOMEM;
	if (rc != 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = n;
	return 0;
}

int innet_dnn_model_load(const char *path, struct innet_dnn_model *m, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	uint8_t *buf;
	size_t len;
	int rc = read_file(path, &buf, &len, (size_t)1 << 30);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	char msg[512];
	rc = innet_dnn_model_parse(buf, len, m, msg, sizeof(msg));
	free(buf);
	if (rc != 0)
		snprintf(err, errlen, "%s: %s", path, msg);
	return rc;
}

void innet_dnn_model_free(struct innet_dnn_model *m)
{
	free(m->blob);
	memset(m, 0, sizeof(*m));
}

/*
 * Test set: "INNETDTS" | u16 version (1) | u16 c | u16 h | u16 w | u32 count,
 * then count records of u8 label + c*h*w int8 values. 20-byte header.
 */
int innet_dnn_testset_load(const char *path, struct innet_dnn_testset *ts, char *err, size_t errlen)
{
	memset(ts, 0, sizeof(*ts));
	uint8_t *buf;
	size_t len;
	int rc = read_file(path, &buf, &len, (size_t)1 << 30);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	rc = -EINVAL;
	if (len < 20 || memcmp(buf, INNET_DNN_TESTSET_MAGIC, 8) != 0 || le16(buf + 8) != 1) {
		snprintf(err, errlen, "%s: not an innet test set (version 1)", path);
		goto out;
	}
	struct innet_dnn_shape s = { le16(buf + 10), le16(buf + 12), le16(buf + 14) };
	uint32_t count = le32(buf + 16);
	uint64_t n = innet_dnn_shape_n(s);
	if (!shape_ok(s) || count == 0 || (len - 20) != (uint64_t)count * (n + 1)) {
		snprintf(err, errlen, "%s: shape %ux%ux%u x %u samples does not match its %zu bytes", path,
			 s.c, s.h, s.w, count, len);
		goto out;
	}
	ts->labels = malloc(count);
	ts->inputs = malloc((size_t)count * n);
	if (ts->labels == NULL || ts->inputs == NULL) {
		rc = -ENOMEM;
		innet_dnn_testset_free(ts);
		goto out;
	}
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *r = buf + 20 + (size_t)i * (n + 1);
		ts->labels[i] = r[0];
		memcpy(ts->inputs + (size_t)i * n, r + 1, n);
	}
	ts->in = s;
	ts->count = count;
	rc = 0;
out:
	free(buf);
	return rc;
}

void innet_dnn_testset_free(struct innet_dnn_testset *ts)
{
	free(ts->labels);
	free(ts->inputs);
	memset(ts, 0, sizeof(*ts));
}
