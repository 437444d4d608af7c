// The engine's analysis results (analyses.hpp) as the views' plain structs: one
// conversion shared by the main window's jobs and the headless figure tool.
#pragma once

#include <QString>
#include <QStringList>

#include "analyses.hpp"
#include "fourier_map_view.hpp"
#include "neighbour_graph_view.hpp"
#include "rank_allocation_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"

namespace embedlab::app {

views::SpectrumData spectrum_view_data(const SpectrumResult& r, const QString& label);
// Another model's spectrum as an overlay curve named `name`.
views::SpectrumOverlay spectrum_overlay(const SpectrumResult& r, const QString& name);
// FLAT-LLM's value spectra, one curve per layer and KV head ("layer l head h"),
// grouped by layer (0-based, as the allocation view counts).
QVector<views::SpectrumOverlay> value_head_overlays(const AllocationResult& r);
// Importance normalised by its largest layer; allocations in the result's order.
views::RankAllocationData allocation_view_data(const AllocationResult& r, const QString& label);
views::FourierMapData fourier_view_data(const FourierMapResult& r, const QString& label);
views::TensorTrainData tt_view_data(const TensorTrainResult& r, const QString& label);
views::NeighbourGraphData lle_view_data(const NeighbourGraphResult& r, const QString& label);
// A t-SNE of the neighbour graph's table, with its parameters in words.
views::NeighbourMapLayout tsne_view_layout(const TsneResult& r);
// The registry's bytes baselines (the quantised table), for ResultsView::setBaselineMethods.
QStringList baseline_methods();

} // namespace embedlab::app
