/* foamtext.h: foamtext.cpp's one entry point, callable from C.
 *
 * foam_stream_numbers: `rows` rows of `components` doubles as ascii lines into
 * `out`, which holds exactly `size` bytes: one number `width` characters wide,
 * magnitudes below 1e-99 as zero and above `largest` clipped; a row of one
 * number ends in a newline, a vector is "(a b c)\n". Returns 1, or 0 when a
 * number came out another width or the text does not fill `out` exactly.
 */
#ifndef TIERBENCH_FOAMTEXT_H
#define TIERBENCH_FOAMTEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int foam_stream_numbers(const double *values, long rows, int components, int width,
                        double largest, char *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif
