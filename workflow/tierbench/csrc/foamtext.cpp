/* foamtext.cpp: numbers as text the way an OpenFOAM ascii Ostream makes them.
 *
 * OpenFOAM's OSstream hands every value to libstdc++'s `ostream << double`
 * and every separator to `ostream << char`: a sentry, num_put's format string,
 * the conversion in the C locale and the copy into the stream's buffer, per
 * number. A bare snprintf makes the same text in about 0.7 of that time
 * (design.md), so the proxy formats through a std::ostream too. The stream is
 * scientific with a sign and `width - 7` digits, so every number is `width`
 * characters and file sizes follow the formula
 * (tierbench.workloads.cfd.foam.format_numbers makes the same bytes in Python).
 * Compiled into the _foamio helper.
 */
#include <cmath>
#include <cstddef>
#include <ostream>
#include <streambuf>

#include "foamtext.h"

namespace {

/* a stream buffer over memory the caller owns: nothing is allocated per write */
class Into : public std::streambuf {
  public:
    Into(char *begin, std::size_t size) { setp(begin, begin + size); }
    std::size_t used() const { return static_cast<std::size_t>(pptr() - pbase()); }
};

}  // namespace

extern "C" int foam_stream_numbers(const double *values, long rows, int components, int width,
                                   double largest, char *out, std::size_t size) {
    Into buffer(out, size);
    std::ostream os(&buffer);
    os.setf(std::ios::scientific, std::ios::floatfield);
    os.setf(std::ios::showpos);
    os.precision(width - 7);
    for (long r = 0; r < rows; r++) {
        if (components > 1) os << '(';
        for (int c = 0; c < components; c++) {
            double x = values[r * components + c];
            double a = std::fabs(x);
            if (!(a >= 1e-99)) x = 0.0; /* NaN, zero and -0.0 too */
            else if (a > largest) x = std::copysign(largest, x);
            std::size_t before = buffer.used();
            os << x;
            if (buffer.used() - before != static_cast<std::size_t>(width)) return 0;
            if (c + 1 < components) os << ' ';
        }
        if (components > 1) os << ')';
        os << '\n';
    }
    return os.good() && buffer.used() == size;
}
