# Writes pages_small.rda: the case study's pages.rda format (domain, numVisits,
# visitsWChanges as a list column), with its two published example pages and two more.
# Run: Rscript make_pages_rda.R   (needs Debian's r-base-core; the .rda is committed)
pages <- data.frame(domain = c("com", "org", "jp", "com"),
                    numVisits = c(378L, 707L, 5L, 719L))
pages$visitsWChanges <- list(
  c(35L, 134L, 155L, 157L, 177L, 204L, 314L, 315L, 319L, 350L, 366L, 369L, 371L),
  c(552L, 604L, 672L),
  integer(0),
  1:719
)
save(pages, file = "pages_small.rda")
