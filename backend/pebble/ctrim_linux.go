//go:build linux && cgo

package pebble

/*
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
static void kyu_trim(void) { malloc_trim(0); }
#define KYU_CAN_TRIM 1
#else
static void kyu_trim(void) {}
#define KYU_CAN_TRIM 0
#endif
*/
import "C"

// canTrimC reports whether trimC does anything: on glibc only.
const canTrimC = C.KYU_CAN_TRIM == 1

// trimC returns the free pages of C's heap to the system (malloc_trim).
func trimC() { C.kyu_trim() }
