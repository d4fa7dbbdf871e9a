#include "headroom/orca/result.h"

#include <cstring>

namespace headroom {

Error system_error(int code, std::string context) {
  context += ": ";
  context += std::strerror(code);
  return Error{code, std::move(context)};
}

}  // namespace headroom
