// Renders the data frame in window.__FRAME__ with Grafana's own FlameGraph
// component (@grafana/flamegraph), the way the flame graph panel draws it.
//
// Inputs (set by render.mjs before the page loads):
//   window.__FRAME__   {fields: [{name, type, values, config?}]}
//   window.__OPTIONS__ {table?: boolean}  also render the full container
//                      (header + top table) below the panel view.
// Outputs (read by render.mjs):
//   window.__FLAME_STATUS__  'rendering' | 'rendered' | 'error'
//   window.__FLAME_ERRORS__  string[]: errors caught by the error boundary
//   window.__FLAME_INFO__    {unit, isDiff, rows} about the frame as the page saw it
import React from 'react';
import { createRoot } from 'react-dom/client';
import { createDataFrame, createTheme, DataFrame } from '@grafana/data';
import { FlameGraph } from '@grafana/flamegraph';

declare global {
  interface Window {
    __FRAME__?: unknown;
    __OPTIONS__?: { table?: boolean };
    __FLAME_STATUS__?: 'rendering' | 'rendered' | 'error';
    __FLAME_ERRORS__?: string[];
    __FLAME_INFO__?: { unit?: string; isDiff: boolean; rows: number };
  }
}

window.__FLAME_STATUS__ = 'rendering';
window.__FLAME_ERRORS__ = [];

function fail(msg: string) {
  window.__FLAME_ERRORS__!.push(msg);
  window.__FLAME_STATUS__ = 'error';
  // Also surface it as a console error so the harness sees it either way.
  console.error('flamehouse-render: ' + msg);
}

class Boundary extends React.Component<{ children: React.ReactNode; name: string }, { error?: string }> {
  state: { error?: string } = {};
  static getDerivedStateFromError(e: unknown) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  componentDidCatch(e: unknown) {
    fail(`${this.props.name}: ${e instanceof Error ? e.message : String(e)}`);
  }
  render() {
    if (this.state.error) {
      return (
        <pre data-testid="renderError" style={{ color: '#ff5286', whiteSpace: 'pre-wrap' }}>
          {this.props.name}: {this.state.error}
        </pre>
      );
    }
    return this.props.children;
  }
}

function Section(props: { title: string; children: React.ReactNode; testid: string }) {
  return (
    <section data-testid={props.testid} style={{ marginBottom: 16 }}>
      <div style={{ color: '#8e8e8e', font: '12px sans-serif', margin: '4px 0' }}>{props.title}</div>
      {props.children}
    </section>
  );
}

const getTheme = () => createTheme();

function App({ frame, table }: { frame: DataFrame; table: boolean }) {
  React.useEffect(() => {
    if (window.__FLAME_STATUS__ === 'rendering') {
      window.__FLAME_STATUS__ = 'rendered';
    }
  }, []);
  return (
    <>
      <Section title="flame graph (showFlameGraphOnly, disableCollapsing)" testid="panelView">
        <Boundary name="FlameGraph">
          <FlameGraph data={frame} getTheme={getTheme} showFlameGraphOnly disableCollapsing />
        </Boundary>
      </Section>
      {table && (
        <Section title="full container (header + top table)" testid="fullView">
          {/* a dashboard panel gives the container a fixed height */}
          <div style={{ height: 420, display: 'flex', flexDirection: 'column' }}>
            <Boundary name="FlameGraph(full)">
              <FlameGraph data={frame} getTheme={getTheme} disableCollapsing showAnalyzeWithAssistant={false} />
            </Boundary>
          </div>
        </Section>
      )}
    </>
  );
}

function main() {
  const container = document.getElementById('root')!;
  const raw = window.__FRAME__;
  if (!raw || typeof raw !== 'object' || !Array.isArray((raw as { fields?: unknown }).fields)) {
    fail('window.__FRAME__ is missing or has no fields array');
    return;
  }
  let frame: DataFrame;
  try {
    frame = createDataFrame(raw as Parameters<typeof createDataFrame>[0]);
  } catch (e) {
    fail(`createDataFrame: ${e instanceof Error ? e.message : String(e)}`);
    return;
  }
  const value = frame.fields.find((f) => f.name === 'value');
  window.__FLAME_INFO__ = {
    unit: value?.config?.unit,
    isDiff: frame.fields.some((f) => f.name === 'valueRight'),
    rows: frame.length,
  };
  createRoot(container).render(<App frame={frame} table={Boolean(window.__OPTIONS__?.table)} />);
}

try {
  main();
} catch (e) {
  fail(`page: ${e instanceof Error ? e.stack || e.message : String(e)}`);
}
