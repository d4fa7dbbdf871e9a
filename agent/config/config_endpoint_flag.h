// SPDX-License-Identifier: Apache-2.0
// headroomd --endpoint 'name=api,port=8080,target=10ms,max=500ms': the keys of
// an [[endpoint]] as comma-separated key=value, checked like the table.
// parse_endpoint_flag (agent/config/config.h) gives the message as one string.
#pragma once

#include <string_view>
#include <variant>

#include "agent/config/config.h"

namespace headroom::agent {

// The endpoint, or a ConfigError without file or place whose key is the
// flag's key at fault ("port"), or empty when the text as a whole is.
std::variant<EndpointConfig, ConfigError> parse_endpoint_flag_checked(std::string_view text);

}  // namespace headroom::agent
