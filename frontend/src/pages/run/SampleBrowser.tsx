import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import { useSearchParams } from "react-router";

import { SAMPLES_SHOWN, useSamples } from "../../api/hooks";
import type { Sample, SamplePage } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import {
  acrossVersions,
  BOUNDS,
  clearedFilters,
  collapse,
  filtersFromSearch,
  formatChange,
  highlight,
  isFiltered,
  isNewestPage,
  MAX_SEARCH,
  ORDER_LABELS,
  ORDERS,
  pageLabel,
  promptTrend,
  queryFor,
  rewardParts,
  searchWithFilters,
  wasTruncated,
  type Bound,
  type CollapseLimits,
  type SampleFilters,
  type SampleOrder,
  type Trend,
  agentTurns,
} from "./sampleBrowser";
import { formatReward } from "./samples";
import { ACROSS_LIMIT, useFollowNewSamples, useSampleBrowse, useSamePrompt, useSampleSummary, type SampleSummary } from "./samplesApi";
import "./sampleBrowser.css";

/** Typing pauses this long before the list follows (and the URL with it). */
export const TYPING_PAUSE_MS = 400;
const PAGE_SIZE = SAMPLES_SHOWN;
const LIST_TEXT: CollapseLimits = { chars: 360, lines: 6 };
const CARD_TEXT: CollapseLimits = { chars: 900, lines: 16 };

type Update = (patch: Partial<SampleFilters>, how?: { push?: boolean }) => void;

/**
 * What the policy said and what the reward made of it, to find where a reward is being gamed:
 * filter by step, reward and response length, search the text, and follow one prompt's answers
 * across steps and weight versions. The view lives in the run page's URL (`samples.*`), so a
 * link shows someone else the same samples.
 */
export function SampleBrowser({ runId }: { runId: number }) {
  const newest = useSamples(runId);
  const [search, setSearch] = useSearchParams();
  const filters = filtersFromSearch(search);
  useFollowNewSamples(runId, newest.dataUpdatedAt);
  const count = newest.data?.count ?? 0;
  const summary = useSampleSummary(runId, count > 0);

  const update: Update = (patch, how) => {
    // From the URL as it is now, not as this render saw it: other parts of the page write there too.
    setSearch((current) => searchWithFilters(current, { ...filtersFromSearch(current), page: 0, ...patch }), {
      replace: !how?.push,
    });
  };

  if (newest.isPending) return null;
  if (newest.isError) return <ErrorBox error={newest.error} title="Cannot load rollout samples" />;
  if (count === 0) return null; // a run that keeps no samples has no panel
  return (
    <details className="panel sample-browser" open data-testid="samples">
      <summary>
        Rollout samples <span className="muted">({summaryText(count, summary.data)})</span>
      </summary>
      {filters.prompt !== null ? (
        <SamePrompt runId={runId} sampleId={filters.prompt} q={filters.q} onClose={() => update({ prompt: null }, { push: true })} />
      ) : (
        <SampleList runId={runId} filters={filters} newest={newest.data} summary={summary.data} update={update} />
      )}
    </details>
  );
}

function summaryText(count: number, summary: SampleSummary | undefined): string {
  const parts = [`${count.toLocaleString("en-US")} kept`];
  if (summary && summary.min_step !== null && summary.max_step !== null) {
    parts.push(summary.min_step === summary.max_step ? `step ${summary.min_step}` : `steps ${summary.min_step}–${summary.max_step}`);
  }
  if (summary && summary.weight_versions > 0) {
    parts.push(`${summary.weight_versions} weight version${summary.weight_versions === 1 ? "" : "s"}`);
  }
  return parts.join(" · ");
}

// ------------------------------------------------------------------ the list

type Draft = Record<Bound, string> & { q: string };

function draftOf(filters: SampleFilters): Draft {
  return { ...Object.fromEntries(BOUNDS.map((b) => [b, filters[b]])), q: filters.q } as Draft;
}

function sameDraft(a: Draft, b: Draft): boolean {
  return a.q === b.q && BOUNDS.every((bound) => a[bound].trim() === b[bound].trim());
}

function SampleList({
  runId,
  filters,
  newest,
  summary,
  update,
}: {
  runId: number;
  filters: SampleFilters;
  newest: SamplePage;
  summary: SampleSummary | undefined;
  update: Update;
}) {
  const plan = queryFor(filters, PAGE_SIZE);
  const onNewest = plan.query !== null && isNewestPage(plan.query);
  const browse = useSampleBrowse(runId, onNewest ? null : plan.query);
  // While the next view's first answer comes, the rows shown stay (marked "updating…") rather
  // than blinking to "Loading…": leaving the newest page changes query, and keepPreviousData
  // only bridges one query's keys.
  const shown = useRef<SamplePage | undefined>(undefined);
  const current = onNewest ? newest : browse.data;
  if (current) shown.current = current;
  const page = current ?? (plan.query !== null && browse.isFetching ? shown.current : undefined);

  // What is typed, ahead of the URL: the list follows once typing pauses (or at Enter), and
  // only with bounds that are numbers; the boxes follow the URL when it changes (clear, back).
  const committed = draftOf(filters);
  const [draft, setDraft] = useState(committed);
  const committedKey = JSON.stringify(committed);
  useEffect(() => setDraft(JSON.parse(committedKey) as Draft), [committedKey]);
  const problems = queryFor({ ...filters, ...draft }, PAGE_SIZE).problems;
  const draftReady = Object.keys(problems).length === 0 && !sameDraft(draft, committed);
  const commit = () => {
    if (draftReady) update(draft);
  };
  useEffect(() => {
    if (!draftReady) return;
    const timer = window.setTimeout(commit, TYPING_PAUSE_MS);
    return () => window.clearTimeout(timer);
    // Only typing restarts the pause.
  }, [JSON.stringify(draft), draftReady]);

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    commit();
  };
  const clear = () => {
    setDraft(draftOf(clearedFilters(filters)));
    update(clearedFilters(filters));
  };
  const set = (name: keyof Draft) => (value: string) => setDraft((d) => ({ ...d, [name]: value }));
  const filtered = isFiltered(filters);
  const results = page?.results ?? [];
  const pages = Math.max(1, Math.ceil((page?.count ?? 0) / PAGE_SIZE));
  const urlProblems = plan.query === null;

  return (
    <>
      <form className="sample-filters" onSubmit={onSubmit} role="search" aria-label="Filter rollout samples">
        <Range
          label="Steps"
          names={["min_step", "max_step"]}
          draft={draft}
          problems={problems}
          hints={[summary?.min_step, summary?.max_step]}
          onChange={set}
          numeric
        />
        <Range
          label="Reward"
          names={["min_reward", "max_reward"]}
          draft={draft}
          problems={problems}
          hints={[summary?.min_reward, summary?.max_reward]}
          onChange={set}
        />
        <Range
          label="Length (tokens)"
          names={["min_tokens", "max_tokens"]}
          draft={draft}
          problems={problems}
          hints={[summary?.min_tokens, summary?.max_tokens]}
          onChange={set}
          numeric
        />
        <label className="sample-search">
          Search{" "}
          <input
            type="search"
            value={draft.q}
            maxLength={MAX_SEARCH}
            placeholder="text in the prompt or response"
            onChange={(e) => set("q")(e.target.value)}
            data-testid="samples-q"
          />
        </label>
        <label>
          Order{" "}
          <select
            value={filters.order}
            onChange={(e) => update({ order: e.target.value as SampleOrder })}
            data-testid="samples-order"
          >
            {ORDERS.map((o) => (
              <option key={o} value={o}>
                {ORDER_LABELS[o]}
              </option>
            ))}
          </select>
        </label>
        {filtered || !sameDraft(draft, draftOf(clearedFilters(filters))) ? (
          <button type="button" onClick={clear} data-testid="samples-clear">
            Clear filters
          </button>
        ) : null}
        {browse.isFetching && !onNewest ? (
          <span className="muted small" role="status">
            updating…
          </span>
        ) : null}
      </form>

      {urlProblems ? (
        <p className="field-error" role="alert">
          This link's sample filters are not numbers; correct or clear them above.
        </p>
      ) : null}
      {!onNewest && browse.isError ? <ErrorBox error={browse.error} title="Cannot load these samples" /> : null}

      {!urlProblems && !(browse.isError && !onNewest) ? (
        <>
          <div className="table-scroll">
            <table className="table samples sample-table" aria-busy={!page}>
              <colgroup>
                <col className="col-step" />
                <col className="col-version" />
                <col className="col-prompt" />
                <col />
                <col className="col-reward" />
                <col className="col-tokens" />
                <col className="col-action" />
              </colgroup>
              <thead>
                <tr>
                  <th className="num">step</th>
                  <th className="num" title="Weight version of the policy that wrote the response">
                    version
                  </th>
                  <th>prompt</th>
                  <th>response</th>
                  <th className="num">reward</th>
                  <th className="num" title="Response length in tokens">
                    tokens
                  </th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {results.map((s) => (
                  <SampleRow
                    key={s.id}
                    sample={s}
                    q={filters.q}
                    onStep={() => update({ min_step: String(s.step), max_step: String(s.step) })}
                    onAcross={() => update({ prompt: s.id }, { push: true })}
                  />
                ))}
                {!page ? (
                  <tr>
                    <td colSpan={7} className="empty">
                      Loading…
                    </td>
                  </tr>
                ) : null}
                {page && results.length === 0 ? (
                  <tr>
                    <td colSpan={7} className="empty" data-testid="samples-empty">
                      {filtered ? "No samples match these filters. " : "No samples on this page. "}
                      <button type="button" onClick={filtered ? clear : () => update({})}>
                        {filtered ? "Clear filters" : "First page"}
                      </button>
                    </td>
                  </tr>
                ) : null}
              </tbody>
            </table>
          </div>
          {page && (page.count > PAGE_SIZE || filters.page > 0) ? (
            <div className="pager">
              <button
                type="button"
                disabled={filters.page === 0}
                onClick={() => update({ page: filters.page - 1 })}
              >
                ← Previous
              </button>
              <span className="num muted" data-testid="samples-page">
                {pageLabel(filters.page, PAGE_SIZE, results.length, page.count)} · page {filters.page + 1}/{pages}
              </span>
              <button type="button" disabled={!page.next} onClick={() => update({ page: filters.page + 1 })}>
                Next →
              </button>
            </div>
          ) : page && filtered ? (
            <p className="muted small" data-testid="samples-page">
              {pageLabel(0, PAGE_SIZE, results.length, page.count)}
            </p>
          ) : null}
        </>
      ) : null}
    </>
  );
}

function Range({
  label,
  names,
  draft,
  problems,
  hints,
  onChange,
  numeric = false,
}: {
  label: string;
  names: [Bound, Bound];
  draft: Draft;
  problems: Partial<Record<Bound, string>>;
  /** The run's own range, shown in the empty boxes. */
  hints: [unknown, unknown];
  onChange: (name: Bound) => (value: string) => void;
  numeric?: boolean;
}) {
  const [low, high] = names;
  const box = (name: Bound, side: string, hint: unknown) => (
    <input
      type="text"
      inputMode={numeric ? "numeric" : "decimal"}
      size={numeric ? 6 : 5}
      value={draft[name]}
      placeholder={typeof hint === "number" ? hintText(hint) : side}
      aria-label={`${label}: ${side}`}
      aria-invalid={problems[name] ? true : undefined}
      aria-describedby={problems[name] ? `${name}-problem` : undefined}
      onChange={(e) => onChange(name)(e.target.value)}
      data-testid={`samples-${name}`}
    />
  );
  const problem = problems[low] ?? problems[high];
  const bad = problems[low] ? low : high;
  return (
    <div className="sample-range" role="group" aria-label={label}>
      <span className="range-label">{label}</span>
      {box(low, "from", hints[0])}
      <span aria-hidden="true">–</span>
      {box(high, "to", hints[1])}
      {problem ? (
        <span className="field-error" id={`${bad}-problem`}>
          {bad.startsWith("min") ? "from" : "to"}: {problem}
        </span>
      ) : null}
    </div>
  );
}

function hintText(value: number): string {
  return String(Number(value.toPrecision(3)));
}

function SampleRow({
  sample,
  q,
  onStep,
  onAcross,
}: {
  sample: Sample;
  q: string;
  onStep: () => void;
  onAcross: () => void;
}) {
  const parts = rewardParts(sample.extra);
  return (
    <tr data-sample={sample.id}>
      <td className="num">
        <button type="button" className="link-button" onClick={onStep} title="Only this step" aria-label={`Only step ${sample.step}`}>
          {sample.step}
        </button>
      </td>
      <td className="num">{sample.weight_version ?? "–"}</td>
      <td className="wrap">
        <SampleText text={sample.prompt} q={q} limits={LIST_TEXT} what="prompt" />
      </td>
      <td className="wrap">
        <ResponseText sample={sample} q={q} limits={LIST_TEXT} />
      </td>
      <td className="num">
        {formatReward(sample.reward)}
        {parts.length > 0 ? <RewardParts parts={parts} /> : null}
      </td>
      <td className="num">
        {sample.response_tokens ?? "–"}
        {wasTruncated(sample.extra) ? (
          <div>
            <span className="tag" title="The response reached the length limit">
              truncated
            </span>
          </div>
        ) : null}
      </td>
      <td>
        <button
          type="button"
          className="across-button"
          onClick={onAcross}
          title="This prompt's samples at every step and weight version, side by side"
          data-testid="samples-across"
        >
          Across versions
        </button>
      </td>
    </tr>
  );
}

function RewardParts({ parts }: { parts: [string, number][] }) {
  return (
    <ul className="reward-parts" aria-label="reward parts">
      {parts.map(([name, value]) => (
        <li key={name}>
          {name} {formatReward(value)}
        </li>
      ))}
    </ul>
  );
}

/** A response as its turns when it is an agent episode (the tools' replies marked as theirs), else its text. */
function ResponseText({ sample, q, limits }: { sample: Sample; q: string; limits: CollapseLimits }) {
  const turns = agentTurns(sample.extra);
  if (turns.length === 0) return <SampleText text={sample.response} q={q} limits={limits} what="response" />;
  return (
    <ol className="turns" aria-label={`${turns.length} turns`}>
      {turns.map((turn, i) => (
        <li key={i} className={turn.role === "tool" ? "tool-turn" : "model-turn"}>
          {turn.role === "tool" ? (
            <span className={turn.kind && turn.kind !== "ok" ? "tag danger" : "tag"} title="What the tool call came to">
              {[turn.tool || "tool", turn.kind, turn.ms ? `${Math.round(turn.ms)} ms` : null /* 0: nothing ran (a format error) */]
                .filter(Boolean)
                .join(" · ")}
            </span>
          ) : null}
          <SampleText text={turn.text} q={q} limits={limits} what={turn.role === "tool" ? "tool reply" : "response"} />
        </li>
      ))}
    </ol>
  );
}

/** A prompt or response: long ones collapsed (with the search's first hit kept in view), matches marked. */
function SampleText({ text, q, limits, what }: { text: string; q: string; limits: CollapseLimits; what: string }) {
  const [open, setOpen] = useState(false);
  if (!text) {
    return <span className="muted">{what === "response" ? "(empty: end of sequence at once)" : "(empty)"}</span>;
  }
  const shown = collapse(text, q, limits);
  return (
    <>
      <code className="sample-text">
        {open || !shown.collapsed ? (
          <Highlighted text={text} q={q} />
        ) : (
          shown.parts.map((part, i) => (
            <span key={i}>
              {i > 0 ? <span className="gap"> … </span> : null}
              <Highlighted text={part} q={q} />
            </span>
          ))
        )}
        {!open && shown.collapsed ? <span className="gap">…</span> : null}
      </code>
      {shown.collapsed ? (
        <button type="button" className="link-button expand" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? `Show less of the ${what}` : `Show the whole ${what} (${text.length.toLocaleString("en-US")} characters)`}
        </button>
      ) : null}
    </>
  );
}

function Highlighted({ text, q }: { text: string; q: string }) {
  return (
    <>
      {highlight(text, q).map((segment, i) => (segment.match ? <mark key={i}>{segment.text}</mark> : segment.text))}
    </>
  );
}

// ------------------------------------------------------------------ one prompt across versions

function SamePrompt({ runId, sampleId, q, onClose }: { runId: number; sampleId: number; q: string; onClose: () => void }) {
  const same = useSamePrompt(runId, sampleId);
  const heading = useRef<HTMLHeadingElement>(null);
  // Opened from a row far down the list: bring the view to the person, and keyboard focus with it.
  useEffect(() => heading.current?.focus(), [sampleId]);
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === "Escape") onClose();
  };
  const steps = acrossVersions(same.data?.results ?? []);
  const first = steps[0]?.sample;
  const trend = promptTrend(steps);
  const unchanged = steps.filter((s) => s.unchanged && s.sample.id !== sampleId).length;
  const [changedOnly, setChangedOnly] = useState(false);
  const shownSteps = changedOnly ? steps.filter((s) => !s.unchanged || s.sample.id === sampleId) : steps;
  // The strip starts at the oldest step; the sample it was opened from is scrolled into view.
  const strip = useRef<HTMLOListElement>(null);
  const loaded = same.data !== undefined;
  useEffect(() => {
    const card = strip.current?.querySelector<HTMLElement>(".version-card.opened");
    if (strip.current && card) {
      strip.current.scrollLeft = Math.max(0, card.offsetLeft - (strip.current.clientWidth - card.clientWidth) / 2);
    }
  }, [loaded, sampleId]);
  return (
    <section className="same-prompt" onKeyDown={onKeyDown} data-testid="samples-same-prompt" aria-labelledby="same-prompt-title">
      <div className="same-prompt-head">
        <button type="button" onClick={onClose} data-testid="samples-back">
          ← All samples
        </button>
        <h3 id="same-prompt-title" tabIndex={-1} ref={heading}>
          One prompt across steps and weight versions
        </h3>
        <span className="muted small">Esc goes back</span>
      </div>
      {same.isPending ? <p className="muted">Loading this prompt's samples…</p> : null}
      {same.isError ? <ErrorBox error={same.error} title="Cannot load this prompt's samples" /> : null}
      {first ? (
        <>
          <div className="same-prompt-text">
            <SampleText text={first.prompt} q={q} limits={CARD_TEXT} what="prompt" />
          </div>
          <div className="same-prompt-bar">
            <p className="same-prompt-trend" data-testid="samples-trend">
              {trendText(steps.length, same.data?.count ?? steps.length, first, steps[steps.length - 1]?.sample)}
              <TrendPart label="reward" trend={trend.reward} format={formatReward} />
              <TrendPart label="length" trend={trend.tokens} format={(v) => `${v} tokens`} />
            </p>
            {unchanged > 0 ? (
              <label>
                <input type="checkbox" checked={changedOnly} onChange={(e) => setChangedOnly(e.target.checked)} /> hide the{" "}
                {unchanged} that repeat the step before
              </label>
            ) : null}
          </div>
          <ol className="version-strip" aria-label="This prompt's samples, oldest step first" tabIndex={0} ref={strip}>
            {shownSteps.map(({ sample, rewardChange, tokensChange, unchanged: repeated }) => (
              <li
                key={sample.id}
                className={sample.id === sampleId ? "version-card opened" : "version-card"}
                data-testid="version-card"
              >
                <div className="version-head">
                  <strong>step {sample.step}</strong>
                  <span className="muted"> · version {sample.weight_version ?? "–"}</span>
                  {sample.id === sampleId ? <span className="tag">opened from here</span> : null}
                </div>
                <dl className="version-facts">
                  <div>
                    <dt>reward</dt>
                    <dd className="num">
                      {formatReward(sample.reward)}
                      <Change value={rewardChange} digits={2} />
                    </dd>
                  </div>
                  <div>
                    <dt>tokens</dt>
                    <dd className="num">
                      {sample.response_tokens ?? "–"}
                      <Change value={tokensChange} digits={0} />
                    </dd>
                  </div>
                </dl>
                <div className="version-tags">
                  {wasTruncated(sample.extra) ? <span className="tag">truncated</span> : null}
                  {repeated ? <span className="tag">same response as the step before</span> : null}
                </div>
                {rewardParts(sample.extra).length > 0 ? <RewardParts parts={rewardParts(sample.extra)} /> : null}
                <ResponseText sample={sample} q={q} limits={CARD_TEXT} />
              </li>
            ))}
          </ol>
        </>
      ) : null}
    </section>
  );
}

function trendText(shown: number, count: number, first: Sample, last: Sample | undefined): string {
  const span = last && last.step !== first.step ? `steps ${first.step}–${last.step}` : `step ${first.step}`;
  const more = count > shown ? ` (the first ${shown} of ${count}; at most ${ACROSS_LIMIT} side by side)` : "";
  return `${count} sample${count === 1 ? "" : "s"} of this prompt, ${span}${more}`;
}

function TrendPart({ label, trend, format }: { label: string; trend: Trend | null; format: (v: number) => string }) {
  if (!trend) return null;
  return (
    <span>
      {" · "}
      {label} {format(trend.first)} → {format(trend.last)}
    </span>
  );
}

function Change({ value, digits }: { value: number | null; digits: number }) {
  if (value === null) return null;
  const direction = value > 0 ? "up" : value < 0 ? "down" : "same";
  return (
    <span className={`change change-${direction}`} title="Change from the step before">
      {" "}
      {formatChange(value, digits)}
    </span>
  );
}
