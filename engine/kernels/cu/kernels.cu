// The one compilation unit build.rs hands to nvcc: every kernel file, so the fatbin is one image.
#include "elementwise.cu"
#include "gemv.cu"
#include "attention.cu"
#include "attention_decode.cu"
#include "attention_decode_tc.cu"
#include "attention_prefill.cu"
#include "sample.cu"
