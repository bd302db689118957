/* JSON Lines output helpers: strings escaped, non-finite numbers as null.
 * Bytes outside printable ASCII are written as \u00XX, so a line is valid
 * JSON whatever encoding a processor name or library banner uses. */
#include "bench.h"

#include <math.h>
#include <stdio.h>

void sb_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        default:
            if (*p < 0x20 || *p >= 0x7f)
                printf("\\u%04x", *p);
            else
                putchar(*p);
        }
    }
    putchar('"');
}

void sb_json_double(double x, int digits)
{
    if (isfinite(x))
        printf("%.*g", digits, x);
    else
        fputs("null", stdout);
}

void sb_emit_skip(const char *test, size_t size, const char *reason)
{
    fputs("{\"type\":\"skip\",\"test\":", stdout);
    sb_json_string(test);
    printf(",\"size_B\":%zu,\"reason\":", size);
    sb_json_string(reason);
    fputs("}\n", stdout);
    fflush(stdout);
}
