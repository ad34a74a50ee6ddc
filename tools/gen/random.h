// The data generators' random numbers: the Rng of common/random.h.
#ifndef PACE_TOOLS_GEN_RANDOM_H_
#define PACE_TOOLS_GEN_RANDOM_H_

#include "common/random.h"

namespace pace {
namespace gen {

using ::pace::Rng;

}  // namespace gen
}  // namespace pace

#endif  // PACE_TOOLS_GEN_RANDOM_H_
