#pragma once
// The profile page's style and script (tools/profile_page/), carried in the
// program by cmake/TagflowEmbed.cmake (Note [The profile page]).

#include <string_view>

namespace tagflow::tools::assets {

std::string_view profile_page_css();
std::string_view profile_page_js();

}  // namespace tagflow::tools::assets
