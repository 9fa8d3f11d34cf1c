/* Flash-style attention kernels (see attention.h); the bodies are in
 * attention_tmpl.h, instantiated for float32 and float64. */
#include "attention.h"

#include <math.h>
#include <stdlib.h>

#include "../../core/core_internal.h"
#include "parallel.h"
#include "vmath.h"

#define ATTN_BQ 64
#define ATTN_BK 64

#define T float
#define SFX f32
#define EXP pd_vexpf
#define SEL pd_self
#include "attention_tmpl.h"
#undef T
#undef SFX
#undef EXP
#undef SEL

#define T double
#define SFX f64
#define EXP exp
#define SEL pd_seld
#include "attention_tmpl.h"
#undef T
#undef SFX
#undef EXP
#undef SEL
