//! Generates the code: the user's function unchanged, then a `const _: () = { ... };` holding the
//! job's body and its `inventory` registration. Everything reaches the runtime through
//! `::cronguard::__private`.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::ItemFn;

use crate::validate::{self, Guard, Job, Overlap, Schedule};

/// Expands `#[scheduled(args)] item`. On error the function is still emitted, followed by the
/// errors, so that the rest of the crate (and the IDE) keeps seeing it.
pub(crate) fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(func) => func,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                "`#[scheduled]` applies to a function; put it on an `async fn` or a plain `fn`",
            )
            .to_compile_error();
            return quote!(#item #error);
        }
    };
    match validate::check(args, &func) {
        Ok(job) => {
            let registration = register(&func, &job);
            quote!(#item #registration)
        }
        Err(error) => {
            let error = error.to_compile_error();
            quote!(#item #error)
        }
    }
}

/// The `const _: () = { ... };` block: body function and `inventory` submission.
fn register(func: &ItemFn, job: &Job) -> TokenStream {
    let krate = krate(job);
    let private = quote!(#krate::__private);
    let ident = &func.sig.ident;

    let name = match &job.name {
        Some(name) => name.to_token_stream(),
        None => {
            let fn_name = ident.unraw().to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #fn_name))
        }
    };

    let schedule = match &job.schedule {
        Schedule::Cron { expr, tz } => {
            let tz = match tz {
                Some(tz) => tz.to_token_stream(),
                None => quote!("UTC"),
            };
            quote!(#private::StaticSchedule::Cron { expr: #expr, tz: #tz })
        }
        Schedule::Every { millis } => {
            let millis = Literal::u64_suffixed(*millis);
            quote!(#private::StaticSchedule::Every { millis: #millis })
        }
    };

    let (guard, feature_check) = match &job.guard {
        Guard::Local => (quote!(#private::StaticGuard::Local), None),
        Guard::File => (quote!(#private::StaticGuard::File), None),
        Guard::Redis(span) => (
            quote!(#private::StaticGuard::Redis),
            // Spanned on `"redis"`, so that a disabled `redis` feature is reported there.
            Some({
                let krate = respan(krate.clone(), *span);
                quote_spanned!(*span=> #krate::__private::require_redis_feature!();)
            }),
        ),
        Guard::Postgres(span) => (
            quote!(#private::StaticGuard::Postgres),
            // Spanned on `"postgres"`, so that a disabled `postgres` feature is reported there.
            Some({
                let krate = respan(krate.clone(), *span);
                quote_spanned!(*span=> #krate::__private::require_postgres_feature!();)
            }),
        ),
        Guard::Custom(name) => (quote!(#private::StaticGuard::Custom(#name)), None),
    };

    let overlap = match job.overlap {
        Overlap::Skip => quote!(#private::Overlap::Skip),
        Overlap::Queue => quote!(#private::Overlap::Queue),
        Overlap::Replace => quote!(#private::Overlap::Replace),
    };

    let lease_millis = Literal::u64_suffixed(job.lease_millis);
    let max_instances = Literal::u32_suffixed(job.max_instances);
    let misfire_grace_millis = Literal::u64_suffixed(job.misfire_grace_millis);
    let timeout_millis = Literal::u64_suffixed(job.limits.timeout_millis);
    let retries = Literal::u32_suffixed(job.limits.retries);
    let backoff_millis = Literal::u64_suffixed(job.limits.backoff_millis);
    let jitter_millis = Literal::u64_suffixed(job.limits.jitter_millis);
    let standby_millis = match job.limits.standby_millis {
        Some(millis) => {
            let millis = Literal::u64_suffixed(millis);
            quote!(::core::option::Option::Some(#millis))
        }
        None => quote!(::core::option::Option::None),
    };
    let coalesce = job.coalesce;
    let history = job.history;
    let body = body(ident, job, &krate);
    let params = &job.signature.params;
    let variant = if job.signature.is_async {
        quote!(Async)
    } else {
        quote!(Blocking)
    };

    quote! {
        #[doc(hidden)]
        const _: () = {
            #feature_check

            #body

            #private::inventory::submit! {
                #private::StaticJob {
                    name: #name,
                    schedule: #schedule,
                    guard: #guard,
                    lease_millis: #lease_millis,
                    history: #history,
                    max_instances: #max_instances,
                    overlap: #overlap,
                    coalesce: #coalesce,
                    misfire_grace_millis: #misfire_grace_millis,
                    timeout_millis: #timeout_millis,
                    retries: #retries,
                    backoff_millis: #backoff_millis,
                    jitter_millis: #jitter_millis,
                    standby_millis: #standby_millis,
                    body: #private::JobBody::#variant(__cronguard_body),
                    states: &[#(<#params as #private::FromContext>::required),*],
                    file: ::core::file!(),
                    line: ::core::line!(),
                }
            }
        };
    }
}

/// `tokens` with every token at `span`, so that an error reported through them points there.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            token.set_span(span);
            token
        })
        .collect()
}

/// The path of the runtime crate: `crate = "..."` or `::cronguard`.
fn krate(job: &Job) -> TokenStream {
    match &job.krate {
        Some(path) => path.to_token_stream(),
        None => quote!(::cronguard),
    }
}

/// `fn __cronguard_body(JobContext) -> ...` calling the user's function and converting what it
/// returns with `IntoJobOutcome`. The conversion is spanned on the declared return type, so a
/// return type that is not `()` or `Result<(), E: Display>` is reported there. Each argument is
/// made from the context by `FromContext` (spanned on its type); a missing state value, which
/// `start()` rules out, would be a failed run, never a panic.
fn body(ident: &syn::Ident, job: &Job, krate: &TokenStream) -> TokenStream {
    let private = quote!(#krate::__private);
    let ctx = quote!(__cronguard_ctx);
    let names: Vec<syn::Ident> = (0..job.signature.params.len())
        .map(|i| quote::format_ident!("__cronguard_arg{}", i))
        .collect();
    let extract: Vec<TokenStream> = job
        .signature
        .params
        .iter()
        .zip(&names)
        .map(|(ty, name)| {
            let from = quote_spanned!(ty.span()=> <#ty as #private::FromContext>::from_context);
            quote! {
                let #name = match #from(&#ctx) {
                    ::core::result::Result::Ok(arg) => arg,
                    ::core::result::Result::Err(missing) => {
                        return ::core::result::Result::Err(::std::string::ToString::to_string(&missing));
                    }
                };
            }
        })
        .collect();
    let param = if names.is_empty() {
        quote!(_)
    } else {
        ctx.clone()
    };
    let convert = match &job.signature.output {
        Some(ty) => quote_spanned!(ty.span()=> <#ty as #private::IntoJobOutcome>::into_job_outcome),
        None => quote!(<() as #private::IntoJobOutcome>::into_job_outcome),
    };
    if job.signature.is_async {
        // The future is spanned on the function's name, so that a future that is not `Send` is
        // reported there rather than on the attribute.
        let future = quote_spanned! {ident.span()=>
            ::std::boxed::Box::pin(async move {
                #(#extract)*
                #convert(#ident(#(#names),*).await)
            })
        };
        quote! {
            fn __cronguard_body(
                #param: #krate::JobContext,
            ) -> #private::BoxFuture<#private::JobOutcome> {
                #future
            }
        }
    } else {
        quote! {
            fn __cronguard_body(#param: #krate::JobContext) -> #private::JobOutcome {
                #(#extract)*
                #convert(#ident(#(#names),*))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn expand(args: TokenStream, item: TokenStream) -> String {
        scheduled(args, item).to_string()
    }

    fn squash(tokens: TokenStream) -> String {
        tokens.to_string()
    }

    #[test]
    fn registers_an_async_job_with_every_setting() {
        let out = expand(
            quote!(
                cron = "0 */5 * * * *",
                tz = "Europe/Berlin",
                lock = "redis",
                lease = "10s",
                overlap = "replace",
                coalesce,
                misfire_grace = "2m",
                name = "settle"
            ),
            quote!(
                async fn settle(ctx: JobContext) -> anyhow::Result<()> {
                    Ok(())
                }
            ),
        );
        assert!(out.starts_with(&squash(quote!(
            async fn settle(ctx: JobContext) -> anyhow::Result<()> {
                Ok(())
            }
        ))));
        for expected in [
            quote!(::cronguard::__private::require_redis_feature!();),
            quote!(::cronguard::__private::StaticSchedule::Cron {
                expr: "0 */5 * * * *",
                tz: "Europe/Berlin"
            }),
            quote!(guard: ::cronguard::__private::StaticGuard::Redis,),
            quote!(lease_millis: 10000u64,),
            quote!(max_instances: 1u32,),
            quote!(overlap: ::cronguard::__private::Overlap::Replace,),
            quote!(coalesce: true,),
            quote!(misfire_grace_millis: 120000u64,),
            quote!(name: "settle",),
            quote!(body: ::cronguard::__private::JobBody::Async(__cronguard_body),),
            quote! {
                let __cronguard_arg0 = match <JobContext as ::cronguard::__private::FromContext>::from_context(&__cronguard_ctx) {
                    ::core::result::Result::Ok(arg) => arg,
                    ::core::result::Result::Err(missing) => {
                        return ::core::result::Result::Err(::std::string::ToString::to_string(&missing));
                    }
                };
                <anyhow::Result<()> as ::cronguard::__private::IntoJobOutcome>::into_job_outcome(
                    settle(__cronguard_arg0).await
                )
            },
            quote!(states: &[<JobContext as ::cronguard::__private::FromContext>::required],),
        ] {
            assert!(
                out.contains(&squash(expected.clone())),
                "missing {expected}\nin {out}"
            );
        }
    }

    #[test]
    fn registers_a_blocking_job_with_defaults() {
        let out = expand(
            quote!(every = "30s"),
            quote!(
                fn tick() {}
            ),
        );
        for expected in [
            quote!(::cronguard::__private::StaticSchedule::Every { millis: 30000u64 }),
            quote!(guard: ::cronguard::__private::StaticGuard::Local,),
            quote!(lease_millis: 30000u64,),
            quote!(overlap: ::cronguard::__private::Overlap::Skip,),
            quote!(coalesce: false,),
            quote!(misfire_grace_millis: 60000u64,),
            quote!(name: ::core::concat!(::core::module_path!(), "::", "tick"),),
            quote!(body: ::cronguard::__private::JobBody::Blocking(__cronguard_body),),
            quote! {
                fn __cronguard_body(_: ::cronguard::JobContext) -> ::cronguard::__private::JobOutcome {
                    <() as ::cronguard::__private::IntoJobOutcome>::into_job_outcome(tick())
                }
            },
        ] {
            assert!(
                out.contains(&squash(expected.clone())),
                "missing {expected}\nin {out}"
            );
        }
        assert!(!out.contains("require_redis_feature"));
    }

    #[test]
    fn state_arguments_are_required_and_made_from_the_context() {
        let out = expand(
            quote!(every = "1m"),
            quote!(
                fn tick(db: State<Db>, ctx: JobContext) {}
            ),
        );
        for expected in [
            quote!(states: &[
                <State<Db> as ::cronguard::__private::FromContext>::required,
                <JobContext as ::cronguard::__private::FromContext>::required
            ],),
            quote!(let __cronguard_arg0 = match <State<Db> as ::cronguard::__private::FromContext>::from_context(&__cronguard_ctx)),
            quote!(tick(__cronguard_arg0, __cronguard_arg1)),
        ] {
            assert!(
                out.contains(&squash(expected.clone())),
                "missing {expected}\nin {out}"
            );
        }
    }

    #[test]
    fn a_crate_path_replaces_every_mention_of_cronguard() {
        let out = expand(
            quote!(
                every = "1m",
                lock = "redis",
                crate = "my_framework::scheduler"
            ),
            quote!(
                async fn tick(ctx: JobContext) {}
            ),
        );
        assert!(!out.contains(":: cronguard"), "{out}");
        for expected in [
            quote!(my_framework::scheduler::__private::require_redis_feature!();),
            quote!(__cronguard_ctx: my_framework::scheduler::JobContext),
            quote!(my_framework::scheduler::__private::inventory::submit!),
        ] {
            assert!(
                out.contains(&squash(expected.clone())),
                "missing {expected}\nin {out}"
            );
        }
    }

    #[test]
    fn strips_raw_identifiers_from_the_default_name() {
        let out = expand(
            quote!(every = "1s"),
            quote!(
                fn r#match() {}
            ),
        );
        assert!(out.contains(&squash(quote!("::", "match"))), "{out}");
    }

    #[test]
    fn keeps_the_function_and_adds_errors_without_registering() {
        let item: ItemFn = parse_quote!(
            fn tick() {}
        );
        let out = expand(
            quote!(every = "soon", lock = "etcd"),
            item.to_token_stream(),
        );
        assert!(out.starts_with(&squash(item.to_token_stream())));
        assert_eq!(out.matches("compile_error").count(), 2, "{out}");
        assert!(!out.contains("inventory"));
    }

    #[test]
    fn rejects_items_that_are_not_functions() {
        let out = expand(
            quote!(every = "1s"),
            quote!(
                struct Tick;
            ),
        );
        assert!(out.starts_with("struct Tick ;"));
        assert!(out.contains("applies to a function"), "{out}");
    }
}
