#!/usr/bin/env bash
# check_layering.sh SRC_DIR — fails (exit 1, one line per violation) if a source
# file includes a header of a layer it may not depend on (DESIGN.md section 2).
#
# Project includes are checked by their first path component; third-party
# includes by their prefix. gflags may be included only by binaries (files
# named *_main.cc, and anything under apps/, tools/, tests/); glog only by .cc
# files in library layers. The public client header includes std and common/ only.
set -u
src=${1:?usage: check_layering.sh SRC_DIR}
cd "$src" || exit 2

# Allowed project layers per layer (its own folder is always allowed).
declare -A allowed=(
  [common]=""
  [storage]="common"
  [net]="common"
  [consistency]="common"
  [server]="common storage net consistency"
  [client]="common net consistency server"
  [apps]="common client"
  [tools]="common storage net client"
  [tests]="common storage net consistency server client apps tools"
)
# Third-party include prefixes allowed per layer (std headers have no '/' or '.h'
# ambiguity worth checking; we only police these known libraries).
declare -A thirdparty=(
  [common]=""
  [storage]="rocksdb"
  [net]="boost flatbuffers"
  [consistency]=""
  [server]=""
  [client]=""
  [apps]=""
  [tools]="rocksdb benchmark"
  [tests]="rocksdb boost flatbuffers benchmark gtest gmock"
)
layers="common storage net consistency server client apps tools tests"
known_thirdparty="rocksdb boost flatbuffers benchmark gtest gmock"
status=0
violation() { echo "layering: $1"; status=1; }

for layer in $layers; do
  [ -d "$layer" ] || continue
  while IFS= read -r -d '' file; do
    is_binary=0
    case "$file" in
      *_main.cc|apps/*|tools/*|tests/*|*_test.cc|*/testing/*|*/fuzz/*|*/examples/*|*/bench/*) is_binary=1 ;;
    esac
    while IFS= read -r line; do
      inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/' <<<"$line")
      top=${inc%%/*}
      if [ "$top" != "$inc" ] && [[ " $layers " == *" $top "* ]]; then
        if [ "$top" != "$layer" ] && [[ " ${allowed[$layer]} " != *" $top "* ]]; then
          violation "$file includes \"$inc\": $layer/ may not depend on $top/"
        fi
        continue
      fi
      case "$inc" in
        gflags/*)
          [ $is_binary = 1 ] || violation "$file includes <$inc>: gflags only in binaries (*_main.cc, apps/, tools/, tests/)"
          continue ;;
        glog/*)
          if [ "$layer" = common ] || [ "$layer" = consistency ] || [ "$layer" = storage ] || [ "$layer" = net ] || [ "$layer" = server ] || [ "$layer" = client ]; then
            case "$file" in *.h) violation "$file includes <$inc>: glog only in .cc files of library layers" ;; esac
          fi
          continue ;;
      esac
      for tp in $known_thirdparty; do
        if [ "$top" = "$tp" ] || [ "$inc" = "$tp.h" ]; then
          [[ " ${thirdparty[$layer]} " == *" $tp "* ]] || [ $is_binary = 1 -a "$tp" = gtest ] || [ $is_binary = 1 -a "$tp" = gmock ] || [ $is_binary = 1 -a "$tp" = benchmark ] ||
            violation "$file includes <$inc>: $layer/ may not use $tp"
        fi
      done
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$file")
  done < <(find "$layer" \( -name '*.h' -o -name '*.cc' \) -print0)
done

# The public client headers: std and common/ only.
for pub in client/pace.h; do
  [ -f "$pub" ] || continue
  while IFS= read -r inc; do
    case "$inc" in
      \"common/*) ;;
      \<*/*\>|\"*) violation "$pub includes $inc: public client headers include only std and common/" ;;
      \<*.h\>) violation "$pub includes $inc: public client headers include only std and common/" ;;
    esac
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$pub" | sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*//; s/[[:space:]].*//')
done
[ $status = 0 ] && echo "layering: ok"
exit $status
