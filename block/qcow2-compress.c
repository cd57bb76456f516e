/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 compressed clusters (spec, "Compressed Clusters Descriptor" and
 * compression_type): zlib raw deflate (no zlib header, as QEMU writes
 * it) or zstd frames. A cluster decompresses to exactly one cluster:
 * output stops there whatever the input says, and falling short is an
 * error. The compressed length comes from the descriptor (at most two
 * clusters), so a hostile cluster costs at most that much input and one
 * cluster of output; zstd's window is capped to the cluster size so a
 * frame cannot ask for more memory.
 */
#include <zlib.h>
#include <zstd.h>

#include "block/qcow2.h"

static int qcow2_zlib_decompress(const uint8_t *in, size_t in_len,
                                 uint8_t *out, size_t out_len, Error **errp)
{
    z_stream strm = { 0 };
    int ret;

    /* Negative window bits: a raw deflate stream. A 32 KiB window reads
     * every stream QEMU writes (it compresses with a 4 KiB window). */
    if (inflateInit2(&strm, -MAX_WBITS) != Z_OK) {
        error_setg(errp, "Could not initialise zlib");
        return -1;
    }
    strm.next_in = (Bytef *)in;
    strm.avail_in = in_len;
    strm.next_out = out;
    strm.avail_out = out_len;
    ret = inflate(&strm, Z_FINISH);
    inflateEnd(&strm);
    /*
     * The cluster is full: done, whether the stream ended (Z_STREAM_END)
     * or not (the data runs on into the padding sectors, or past one
     * cluster: output stops at the cluster either way).
     */
    if ((ret == Z_STREAM_END || ret == Z_BUF_ERROR || ret == Z_OK) &&
        strm.avail_out == 0) {
        return 0;
    }
    error_setg(errp, "zlib decompression failed (%s)",
               ret == Z_STREAM_END ? "the stream ends before the cluster"
               : strm.msg ? strm.msg : "invalid data");
    return -1;
}

static int qcow2_zstd_decompress(const uint8_t *in, size_t in_len,
                                 uint8_t *out, size_t out_len, Error **errp)
{
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    ZSTD_inBuffer input = { in, in_len, 0 };
    ZSTD_outBuffer output = { out, out_len, 0 };
    unsigned window_log = 10;
    int ret = -1;

    if (!dctx) {
        error_setg(errp, "Could not initialise zstd");
        return -1;
    }
    while ((1ull << window_log) < out_len) {
        window_log++;
    }
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, window_log);
    /* Frames follow each other until the cluster is full. */
    while (output.pos < output.size) {
        size_t last_pos = output.pos, last_in = input.pos;
        size_t r = ZSTD_decompressStream(dctx, &output, &input);

        if (ZSTD_isError(r)) {
            error_setg(errp, "zstd decompression failed (%s)",
                       ZSTD_getErrorName(r));
            goto out;
        }
        if (output.pos == last_pos && input.pos == last_in) {
            error_setg(errp, "zstd decompression failed (the data ends "
                       "before the cluster)");
            goto out;
        }
    }
    ret = 0;

out:
    ZSTD_freeDCtx(dctx);
    return ret;
}

int qcow2_decompress(Qcow2CompressionType type, const uint8_t *in,
                     size_t in_len, uint8_t *out, size_t out_len,
                     Error **errp)
{
    switch (type) {
    case QCOW2_COMPRESSION_ZLIB:
        return qcow2_zlib_decompress(in, in_len, out, out_len, errp);
    case QCOW2_COMPRESSION_ZSTD:
        return qcow2_zstd_decompress(in, in_len, out, out_len, errp);
    }
    error_setg(errp, "Unknown compression type %d", type);
    return -1;
}

/* ---- Compression (convert -c) */

/* QEMU's choices: a raw deflate stream with a 4 KiB window. */
static size_t qcow2_zlib_compress(const uint8_t *in, size_t in_len,
                                  uint8_t *out, size_t out_len)
{
    z_stream strm = { 0 };
    size_t n = 0;
    int ret;

    if (deflateInit2(&strm, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -12, 9,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        return 0;
    }
    strm.next_in = (Bytef *)in;
    strm.avail_in = in_len;
    strm.next_out = out;
    strm.avail_out = out_len;
    ret = deflate(&strm, Z_FINISH);
    if (ret == Z_STREAM_END) {
        n = out_len - strm.avail_out;
    }
    deflateEnd(&strm);
    return n;
}

static size_t qcow2_zstd_compress(const uint8_t *in, size_t in_len,
                                  uint8_t *out, size_t out_len)
{
    size_t n = ZSTD_compress(out, out_len, in, in_len, ZSTD_CLEVEL_DEFAULT);

    return ZSTD_isError(n) ? 0 : n;
}

size_t qcow2_compress(Qcow2CompressionType type, const uint8_t *in,
                      size_t in_len, uint8_t *out, size_t out_len)
{
    switch (type) {
    case QCOW2_COMPRESSION_ZLIB:
        return qcow2_zlib_compress(in, in_len, out, out_len);
    case QCOW2_COMPRESSION_ZSTD:
        return qcow2_zstd_compress(in, in_len, out, out_len);
    }
    return 0;
}
