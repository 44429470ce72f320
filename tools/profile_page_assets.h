#pragma once
// The profile page's style and script (tools/profile_page/), carried in the
// program by cmake/TagflowEmbed.cmake (Note [The profile page]).

#include <string_view>

namespace tagflow::tools::assets {

std::string_view profile_page_css();
// The script's three parts, joined in this order inside one function scope
// (tools/profile_page/data.js says what each holds).
std::string_view profile_page_data_js();
std::string_view profile_page_drawing_js();
std::string_view profile_page_interaction_js();

}  // namespace tagflow::tools::assets
