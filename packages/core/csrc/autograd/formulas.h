// Every helper of the derivative and tangent formulas written in ops/*.yaml, for the generated
// autograd code (autograd_*.cpp). The basic helpers are in formulas_base.h; each
// formulas_<family>.h includes what it uses, so the headers form no include cycle
// (tools/check_layers.py checks it).
#pragma once
#include "autograd/formulas_base.h"
#include "autograd/formulas_complex.h"
#include "autograd/formulas_forward.h"
#include "autograd/formulas_linalg.h"
#include "autograd/formulas_math.h"
#include "autograd/formulas_nn.h"
#include "autograd/formulas_norm.h"
#include "autograd/formulas_rnn.h"
#include "autograd/formulas_shape.h"
